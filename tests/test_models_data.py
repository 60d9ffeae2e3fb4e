import pytest
import torch
from solutions import plainly_wrong

import labkit
from labkit.instruments import memory
from labkit.lab import answers, exercises
from labkit.workloads import data, models


def test_mlp_parameter_count_is_exact():
    mlp = models.MLP(10, 20, 2, 3)
    assert models.count_parameters(mlp) == (10 * 20 + 20) + (20 * 20 + 20) + (20 * 3 + 3)
    for p in mlp.backbone.parameters():
        p.requires_grad_(False)
    assert models.count_parameters(mlp, trainable_only=True) == 20 * 3 + 3
    with pytest.raises(ValueError, match="hidden must be a positive integer"):
        models.MLP(10, 0, 2, 3)


def test_families_build_and_run():
    assert models.build_model("cnn", "xs")(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert models.build_model("mlp", "xs")(torch.randn(2, 256)).shape == (2, 10)
    gpt = models.build_model("gpt", "xs", max_len=32)
    assert gpt(torch.randint(0, 256, (2, 16))).shape == (2, 16, 256)
    with pytest.raises(ValueError, match="unknown model family 'rnn'; allowed: mlp, cnn, gpt"):
        models.build_model("rnn")
    with pytest.raises(ValueError, match="unknown size 'xxl' for gpt; allowed: xs, s, m, l"):
        models.build_model("gpt", "xxl")


def test_too_large_model_fails_before_allocating():
    with pytest.raises(memory.DoesNotFitError, match="mlp-l weights needs about"):
        models.build_model("mlp", "l", hidden=1_000_000, depth=20)


def test_kv_cache_generates_the_same_tokens():
    torch.manual_seed(0)
    gpt = models.build_model("gpt", "xs", max_len=64)
    prompt = data.counting_tokens(3, 8)
    assert torch.equal(gpt.generate(prompt, 10, use_cache=True), gpt.generate(prompt, 10, use_cache=False))
    with pytest.raises(ValueError, match="exceeds max_len=64"):
        gpt(torch.zeros(1, 65, dtype=torch.long))


def test_torchvision_models_have_random_weights_and_known_sizes():
    assert models.count_parameters(models.torchvision_model("resnet18")) == 11_689_512
    with pytest.raises(ValueError, match="unknown torchvision model 'resnet19'"):
        models.torchvision_model("resnet19")


def test_synthetic_data_is_deterministic_and_learnable_shaped():
    a, b = data.teacher_classification(100, 8, 4, seed=1), data.teacher_classification(100, 8, 4, seed=1)
    assert torch.equal(a.tensors[0], b.tensors[0]) and torch.equal(a.tensors[1], b.tensors[1])
    assert len(a.tensors[1].unique()) >= 2
    imgs = data.grating_images(16, size=16, classes=4)
    assert imgs.tensors[0].shape == (16, 3, 16, 16)
    toks = data.counting_tokens(4, 10, vocab=50)
    steps = (toks[:, 1:] - toks[:, :-1]) % 50
    assert (steps == steps[:, :1]).all()  # each sequence counts by its own constant step
    with pytest.raises(ValueError, match="classes >= 2"):
        data.teacher_classification(10, 4, 1)


def test_exercise_checker_never_raises_on_an_answer(capsys):
    assert exercises.check("input_size.1", None) is None
    assert exercises.check("input_size.1", 48) is True
    assert exercises.check("input_size.1", "forty-eight") is False
    assert exercises.check("start_here.3", "Memory-bound ", roof=labkit.Roofline(100e9, 10e9)) is True
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "correct" in out and "not yet" in out and "Hint: 4x the tokens" in out
    with pytest.raises(ValueError, match="no exercise '99.1' in the answer key"):
        exercises.check("99.1", 1)
    with pytest.raises(TypeError, match="inference_vs_training.3 needs step_s, batch from the notebook"):
        exercises.check("inference_vs_training.3", 1.0)


def test_answers_to_three_significant_figures_are_accepted_and_others_are_not():
    assert exercises.matches(239, 239.2857) and exercises.matches(68.7, 68.719) and exercises.matches(1.47, 1.4706)
    assert not exercises.matches(240, 239.2857) and not exercises.matches(1.5, 1.4706)
    assert exercises.matches(True, True) and not exercises.matches(1, True) and not exercises.matches(False, True)
    assert exercises.matches(4_190_000, 4_194_304) and not exercises.matches(4_100_000, 4_194_304)


def test_every_key_without_context_rejects_a_plainly_wrong_answer():
    for name, key in answers.KEY.items():
        if not key.needs:
            assert not exercises.matches(plainly_wrong(key.expected()), key.expected()), name
            assert exercises.matches(key.expected(), key.expected()), name


def test_a_prediction_is_measured_only_once_written(capsys):
    calls = []
    check = labkit.check_prediction("start_here.4", None, {"x": lambda: calls.append(1)})
    assert check.verdict is None and calls == [], "nothing is measured before the learner predicts"
    assert "write your prediction first" in capsys.readouterr().out
    with pytest.raises(ValueError, match="no prediction exercise '99.9'"):
        labkit.check_prediction("99.9", 1.0, {"x": lambda: 1.0})
    with pytest.raises(ValueError, match="a prediction is a positive number"):
        labkit.check_prediction("start_here.4", "eight", {"x": lambda: 1.0}, timed=False)
    with pytest.raises(TypeError, match="give what to measure"):
        labkit.check_prediction("start_here.4", 8.0)
    with pytest.raises(ValueError, match="say which quantity"):
        labkit.check_prediction("start_here.4", 8.0, {"x": lambda: 1.0, "y": lambda: 1.0}, timed=False)


def test_a_prediction_is_judged_against_the_measured_interval(capsys, monkeypatch):
    """Deterministic samples: 8 (within 1.5) holds, 20 is contradicted and gets the hint, and never raises, even
    in strict mode; a noisy measurement that straddles the band's edge is undecided."""
    monkeypatch.setenv("LABKIT_CLAIMS", "strict")
    ratio = iter([7.0, 7.4, 7.2, 7.1, 7.3] * 20)
    check = labkit.check_prediction("start_here.4", 8, {"ratio": lambda: next(ratio)}, timed=False)
    assert (check.verdict, check.rounds) == ("holds", 5) and 7.0 <= check.measured <= 7.4
    assert check.judge(20) == "contradicted" and check.judge(7.2) == "holds" and check.judge(3.0) == "contradicted"
    wrong = labkit.check_prediction("start_here.4", 20, {"ratio": [7.0, 7.4, 7.2, 7.1, 7.3]})
    assert wrong.verdict == "contradicted"
    assert "not 20. Hint: both products are compute-bound" in capsys.readouterr().out
    noisy = labkit.check_prediction("start_here.4", 8, {"ratio": [4.0, 7.0, 12.0, 6.0, 9.0]})
    assert noisy.verdict == "undecided" and set(noisy.to_dict()) >= {"exercise", "prediction", "verdict", "low"}


def test_every_prediction_exercise_allows_a_modelling_error_but_not_a_plainly_wrong_guess():
    for name, spec in answers.PREDICTIONS.items():
        assert 1 < spec.within <= 1.5, f"{name}: a factor {spec.within} either way is not a prediction"
        assert plainly_wrong(1.0, prediction=True) / spec.within > spec.within, name


def test_jpeg_gratings_decode_back_to_the_images_through_the_pipeline():
    files, labels = data.jpeg_gratings(6, size=48, noise=0.5, seed=3)
    assert len(files) == 6 and all(f.dtype == torch.uint8 and f.ndim == 1 for f in files)
    assert bytes(files[0][:2].tolist()) == b"\xff\xd8"  # a JPEG file starts with the SOI marker
    again, labels_again = data.jpeg_gratings(6, size=48, noise=0.5, seed=3)
    assert torch.equal(labels, labels_again) and all(torch.equal(a, b) for a, b in zip(files, again, strict=True))
    ds = data.JpegDataset(files, labels, out_size=16)
    x, y = ds[2]
    assert x.shape == (3 * 16 * 16,) and x.dtype == torch.float32 and y == labels[2]
    # the half-turn augmentation keeps the image's content (and so its class): same pixel statistics
    flipped = data.JpegDataset(files, labels, out_size=16, augment=True)
    torch.manual_seed(0)
    xs = [flipped[2][0] for _ in range(8)]
    assert all(torch.allclose(v.sort().values, x.sort().values, atol=1e-5) for v in xs)
    with pytest.raises(ValueError, match="3 files but 2 labels"):
        data.JpegDataset(files[:3], labels[:2])
    with pytest.raises(ValueError, match="quality must be between 1 and 100"):
        data.jpeg_gratings(2, quality=0)


def test_serialized_bytes_counts_what_torch_save_writes():
    model = models.MLP(64, 128, 2, 4)
    params = 4 * models.count_parameters(model)
    size = memory.serialized_bytes(model)
    assert params <= size < params + 16_384  # the weights plus a small header per tensor
    half = memory.serialized_bytes(model.to(torch.bfloat16))
    assert params / 2 <= half < params / 2 + 16_384


def test_lora_trains_only_the_adapters_and_starts_as_the_original():
    torch.manual_seed(0)
    model = models.MLP(16, 32, 2, 4)
    x = torch.randn(5, 16)
    before = model(x)
    n_before = labkit.count_parameters(model)
    models.add_lora(model, rank=2)
    assert torch.equal(model(x), before)  # B starts at zero
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    widths = model.widths
    assert trainable == sum(2 * (a + b) for a, b in zip(widths[:-1], widths[1:], strict=True))
    assert labkit.count_parameters(model) == n_before + trainable


def test_lora_training_flops_formula_matches_the_counter():
    model = models.add_lora(models.MLP(16, 32, 3, 4), rank=3)
    x, y = torch.randn(7, 16), torch.randint(0, 4, (7,))
    counted = labkit.count_flops(lambda: torch.nn.functional.cross_entropy(model(x), y).backward())
    assert counted == models.lora_training_flops(model.widths, 7, 3)
