import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from labkit.instruments import max_batch, memory
from labkit.instruments.timing import MeasurementError
from labkit.predict import memory_model
from labkit.workloads import models


def test_bytes_per_parameter_from_first_principles():
    adam = memory_model.bytes_per_parameter("fp32 adam")
    assert (adam.parameters, adam.gradients, adam.optimizer, adam.total) == (4, 4, 8, 16)
    assert memory_model.bytes_per_parameter("mixed adam").total == 16  # 2 + 2 + (4 master + 4 + 4 moments)
    assert memory_model.bytes_per_parameter("fp32 sgd").total == 8
    assert memory_model.bytes_per_parameter("bf16 inference").total == 2
    assert memory_model.bytes_per_parameter("int8 inference").total == 1
    with pytest.raises(ValueError, match="unknown recipe 'adamw'; allowed: fp32 inference"):
        memory_model.bytes_per_parameter("adamw")


def test_state_bytes_only_trainable_parameters_carry_gradients_and_optimizer_state():
    assert memory_model.state_bytes(1000, "fp32 adam") == dict(parameters=4000, gradients=4000, optimizer=8000)
    assert memory_model.state_bytes(1000, "fp32 adam", n_trainable=10) == dict(
        parameters=4000, gradients=40, optimizer=80
    )


def test_an_allocation_inside_the_call_is_counted_exactly():
    rec = memory.peak_memory(lambda: torch.ones(1000, 1000), label="ones")
    assert rec.by_category["activations"] == 4_000_000
    assert rec.peak_bytes == 4_000_000
    assert rec.resident_by_category["activations"] == 0  # freed on return: a transient
    assert rec.transient_bytes == 4_000_000


def test_training_step_state_matches_first_principles_exactly():
    mlp = models.MLP(32, 64, 2, 4)
    opt = torch.optim.Adam(mlp.parameters())
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(mlp(x), y).backward()
        opt.step()

    step()  # Adam creates its state on the first step
    rec = memory.peak_memory(step, track=(mlp, opt, x, y))
    n = sum(p.numel() for p in mlp.parameters())
    n_tensors = len(list(mlp.parameters()))
    expected = memory_model.state_bytes(n, "fp32 adam")
    held = rec.resident_by_category
    assert held["parameters"] == expected["parameters"]
    assert held["gradients"] == expected["gradients"]
    # Adam also keeps one float32 step counter per parameter tensor
    assert held["optimizer"] == expected["optimizer"] + 4 * n_tensors
    assert rec.peak_bytes >= sum(held.values())
    assert set(rec.by_category) == set(memory.CATEGORIES)


def test_inference_holds_only_weights_and_activations():
    mlp = models.MLP(32, 64, 2, 4)
    x = torch.randn(16, 32)
    with torch.no_grad():
        rec = memory.peak_memory(mlp, x)
    n = sum(p.numel() for p in mlp.parameters())
    assert rec.by_category["parameters"] == 4 * n
    assert rec.by_category["gradients"] == 0 and rec.by_category["optimizer"] == 0
    assert rec.by_category["other"] == x.nbytes  # the input batch, handed in from outside


def test_saved_activations_grow_linearly_with_batch():
    mlp = models.MLP(64, 128, 3, 8)
    acts = [memory.peak_memory(mlp, torch.randn(b, 64)).by_category["activations"] for b in (32, 64, 128)]
    assert acts[1] == 2 * acts[0] and acts[2] == 4 * acts[0]


def test_errors_are_clear():
    with pytest.raises(MeasurementError, match="'boom' raised RuntimeError"):
        memory.peak_memory(lambda: (_ for _ in ()).throw(RuntimeError("x")), label="boom")
    with pytest.raises(TypeError, match="needs a callable"):
        memory.peak_memory(None)
    with pytest.raises(memory.DoesNotFitError, match=r"needs about .* GiB but cpu has"):
        memory.ensure_fits(2**60, "cpu", what="a 1 EiB tensor")
    with pytest.raises(memory.DoesNotFitError, match=r"needs about 2.00 GiB but the budget is 1.00 GiB"):
        memory.ensure_fits(2 * 2**30, "cpu", what="x", budget_bytes=2**30)
    memory.ensure_fits(2**30, "cpu", budget_bytes=2**30)  # exactly fits


def test_record_serialises():
    rec = memory.peak_memory(lambda: torch.ones(10), label="tiny")
    d = rec.to_dict()
    assert d["peak_bytes"] == 40 and d["by_category"]["activations"] == 40
    assert "tiny: peak" in str(rec)


def test_frozen_backbone_is_tracked_and_holds_no_gradients():
    mlp = models.MLP(32, 64, 2, 4)
    for p in mlp.backbone.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(mlp.head.parameters())
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(mlp(x), y).backward()
        opt.step()

    rec = memory.peak_memory(step, track=(mlp, opt, x, y))
    n_head = sum(p.numel() for p in mlp.head.parameters())
    assert rec.resident_by_category["gradients"] == 4 * n_head
    assert rec.resident_by_category["optimizer"] == 8 * n_head + 4 * 2


def _small_gpt_build(device="cpu"):
    def build():
        torch.manual_seed(0)
        gpt = models.TinyGPT(vocab=64, d_model=32, n_layers=2, n_heads=2, max_len=32)
        opt = torch.optim.Adam(gpt.parameters())
        idx = torch.randint(0, 64, (4, 32))

        def step():
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(gpt(idx).flatten(0, 1), idx.flatten()).backward()
            opt.step()

        step()
        return step, (gpt, opt, idx)

    return build


def test_fake_tensor_prediction_equals_a_real_run():
    build = _small_gpt_build()
    step, track = build()
    real = memory.peak_memory(step, track=track)
    predicted = memory.predict_peak_memory(build)
    assert predicted.peak_bytes == real.peak_bytes
    assert predicted.by_category == real.by_category
    assert "fake tensors" in predicted.source


def test_fake_prediction_of_a_billion_parameters_allocates_nothing():
    def build():
        with torch.device("cpu"):
            big = nn.Linear(32_768, 32_768, bias=False)  # 1.07e9 parameters, 4.3 GB if real
        x = torch.randn(2, 32_768)
        return (lambda: big(x).sum().backward()), (big, x)

    predicted = memory.predict_peak_memory(build)
    n = 32_768**2
    assert predicted.by_category["parameters"] == 4 * n
    assert predicted.resident_by_category["gradients"] == 4 * n
    assert 8 * n <= predicted.peak_bytes < 8 * n + 2**20  # weights + their gradient, plus a few small tensors


def test_transformer_estimate_and_fit_check():
    est = memory_model.estimate_transformer_training(
        1000, "fp32 adam", batch=2, seq_len=8, d_model=4, n_layers=3, vocab=10
    )
    assert est["parameters"] == 4000 and est["gradients"] == 4000 and est["optimizer"] == 8000
    assert est["activations"] == 2 * 8 * (18 * 4 * 3 + 2 * 10) * 4
    assert est["total"] == 16000 + est["activations"]
    mixed = memory_model.estimate_transformer_training(
        1000, "mixed adam", batch=2, seq_len=8, d_model=4, n_layers=3, vocab=10
    )
    assert mixed["activations"] == est["activations"] // 2
    # GiB, not 10⁹ bytes: 90% of 24 GiB is 23,192,823,398 bytes (24e9 would say 21.6e9)
    assert memory_model.fits_on(int(0.9 * 24 * 2**30), 24) and not memory_model.fits_on(int(0.9 * 24 * 2**30) + 1, 24)
    assert memory_model.fits_on(22_000_000_000, 24)
    with pytest.raises(ValueError, match="sizes must be positive integers"):
        memory_model.estimate_transformer_training(-5)
    with pytest.raises(ValueError, match="unknown recipe 'fp8 adam'"):
        memory_model.estimate_transformer_training(1000, "fp8 adam")
    with pytest.raises(ValueError, match="gpu_gib must be a positive finite number"):
        memory_model.fits_on(1, 0)


def _step_needing(bytes_per_sample: int, fixed: int = 0):
    """A step whose peak is exactly fixed + bytes_per_sample x batch (float32 buffers)."""

    def step(batch: int) -> None:
        torch.empty((fixed + bytes_per_sample * batch) // 4)

    return step


def test_find_max_batch_brackets_the_limit_exactly():
    # peak = 4000 + 400·b bytes; budget 100_000 → b ≤ 240
    search = max_batch.find_max_batch(_step_needing(400, 4000), "cpu", budget_bytes=100_000)
    assert (search.largest_fitting, search.smallest_failing) == (240, 241)
    by_batch = {t.batch: t for t in search.trials}
    assert by_batch[240].fits and by_batch[240].peak_bytes == 100_000
    assert not by_batch[241].fits and by_batch[241].note == "over the budget"
    assert [t.batch for t in search.trials][:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # doubling, then bisection
    assert len(search.trials) <= 9 + 8
    assert "240" in str(search) and "241" in str(search)


class _FakeCudaAllocator:
    """The CUDA caching allocator's counters, on a CPU: ``held`` bytes already allocated, ``capacity`` in all."""

    def __init__(self, monkeypatch, held: int, capacity: int):
        self.current, self.peak, self.capacity, self.empty_cache_calls = held, held, capacity, 0
        for name, fake in dict(
            synchronize=lambda device=None: None,
            reset_peak_memory_stats=lambda device=None: setattr(self, "peak", self.current),
            memory_allocated=lambda device=None: self.current,
            max_memory_allocated=lambda device=None: self.peak,
            max_memory_reserved=lambda device=None: self.peak,
            empty_cache=lambda: setattr(self, "empty_cache_calls", self.empty_cache_calls + 1),
            mem_get_info=lambda device=None: (self.capacity - self.current, self.capacity),
        ).items():
            monkeypatch.setattr(torch.cuda, name, fake)

    def step_needing(self, bytes_per_sample: int):
        def step(batch: int) -> None:
            need = bytes_per_sample * batch
            if self.current + need > self.capacity:
                raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {need} bytes")
            self.current += need
            self.peak = max(self.peak, self.current)
            self.current -= need

        return step


def test_the_cuda_search_counts_the_steps_own_peak_not_what_the_process_holds(monkeypatch):
    # 4,000 bytes of tracked state (the model), 50 MB held by earlier cells, 400 bytes a sample
    state = torch.zeros(1000)
    monkeypatch.setattr(memory.gc, "collect", lambda: 0)  # nothing to collect here; 0.2 s a call with torch loaded
    fake = _FakeCudaAllocator(monkeypatch, held=50_000_000 + state.nbytes, capacity=10**9)
    step = fake.step_needing(400)
    search = max_batch.find_max_batch(step, "cuda", budget_bytes=100_000, track=(state,))
    assert (search.largest_fitting, search.smallest_failing) == (240, 241), "(budget - state) / bytes a sample"
    assert {t.batch: t.peak_bytes for t in search.trials}[240] == 100_000
    assert fake.empty_cache_calls == len(search.trials), "each trial hands the cached blocks back"
    # Without a budget a real out-of-memory is the failure; 100,000 bytes free beyond what is held give the same
    capped = _FakeCudaAllocator(monkeypatch, held=50_000_000 + state.nbytes, capacity=50_000_000 + 100_000)
    real = max_batch.find_max_batch(capped.step_needing(400), "cuda", track=(state,))
    assert (real.largest_fitting, real.smallest_failing) == (240, 241)
    oom = [t for t in real.trials if not t.fits]
    assert oom and all(t.peak_bytes is None and t.note.startswith("out of memory") for t in oom)
    assert capped.current == 50_000_000 + state.nbytes, "nothing is left allocated after the failed trials"


def test_find_max_batch_stops_at_its_limit_and_fails_clearly_when_nothing_fits():
    search = max_batch.find_max_batch(_step_needing(4), "cpu", budget_bytes=10**6, limit=100)
    assert (search.largest_fitting, search.smallest_failing) == (100, None)
    with pytest.raises(memory.DoesNotFitError, match="even batch 1 does not fit"):
        max_batch.find_max_batch(_step_needing(400, 10**6), "cpu", budget_bytes=1000)


def test_find_max_batch_rejects_bad_input():
    step = _step_needing(4)
    with pytest.raises(ValueError, match="real out-of-memory ends the process"):
        max_batch.find_max_batch(step, "cpu")
    with pytest.raises(ValueError, match="start must be a positive integer"):
        max_batch.find_max_batch(step, "cpu", budget_bytes=100, start=0)
    with pytest.raises(ValueError, match="limit .* must be at least start"):
        max_batch.find_max_batch(step, "cpu", budget_bytes=100, start=8, limit=4)
    with pytest.raises(ValueError, match="budget_bytes must be positive"):
        max_batch.find_max_batch(step, "cpu", budget_bytes=-1)


def test_find_max_batch_passes_a_broken_step_through():
    def broken(batch):
        raise RuntimeError("shape mismatch")

    with pytest.raises(MeasurementError, match="shape mismatch"):
        max_batch.find_max_batch(broken, "cpu", budget_bytes=100)


def test_a_model_called_several_times_in_one_measurement_is_tracked():
    # Gradient accumulation calls the model once per micro-batch; MemTracker alone refuses the second call.
    torch.manual_seed(0)
    model = models.MLP(16, 64, 2, 4)
    x = torch.randn(32, 16)

    def accumulate(k):
        for xb in x.chunk(k):
            model(xb).sum().backward()

    once = memory.peak_memory(accumulate, 1, track=(model, x))
    four = memory.peak_memory(accumulate, 4, track=(model, x))
    grads = 4 * models.count_parameters(model)
    assert once.resident_by_category["gradients"] == four.resident_by_category["gradients"] == grads
    assert four.by_category["activations"] < once.by_category["activations"]


def test_kv_cache_bytes_is_two_vectors_per_layer_head_and_token():
    # Llama 2 7B (32 layers, 32 heads of 128), 4,096 tokens in 16-bit: 2 GiB per sequence, exactly
    assert memory_model.kv_cache_bytes(32, 32, 128, 4096, bytes_per_value=2) == 2 * 2**30
    # Llama 2 70B shares 8 key/value heads among 64 query heads over 80 layers: 1.25 GiB
    assert memory_model.kv_cache_bytes(80, 8, 128, 4096, bytes_per_value=2) == 5 * 2**28
    assert memory_model.kv_cache_bytes(2, 4, 16, 10, batch=3, bytes_per_value=4) == 2 * 2 * 4 * 16 * 10 * 3 * 4
    with pytest.raises(ValueError, match="tokens must be a positive integer"):
        memory_model.kv_cache_bytes(2, 4, 16, 0)


def test_the_kv_cache_formula_matches_what_the_model_caches():
    """The formula against the tensors TinyGPT really keeps in its cache after a prefill."""
    spec = models.GPT_SIZES["xs"]
    gpt = models.TinyGPT(vocab=256, max_len=64, **spec).eval()
    caches = [{} for _ in gpt.blocks]
    with torch.inference_mode():
        gpt(torch.randint(0, 256, (3, 20)), caches)
    held = sum(t.nbytes for c in caches for t in c.values())
    assert held == memory_model.kv_cache_bytes(spec["n_layers"], spec["n_heads"], spec["d_model"] // spec["n_heads"], 20,
                                         batch=3, bytes_per_value=4)  # fmt: skip


def test_sharded_state_matches_the_zero_paper_and_hand_worked_cases():
    """Rajbhandari et al. (2020), figure 1: 7.5B parameters, mixed-precision Adam (K = 12), 64 data-parallel GPUs:
    120 GB per GPU without ZeRO, 31.4 at stage 1, 16.6 at stage 2, 1.9 at stage 3."""
    per_gpu = {
        stage: sum(memory_model.sharded_state_bytes(7_500_000_000, "mixed adam", memory_model.ParallelLayout(data=64, zero=stage)).values())
        for stage in (0, 1, 2, 3)
    }  # fmt: skip
    assert per_gpu == {0: 120e9, 1: 31.40625e9, 2: 16.640625e9, 3: 1.875e9}
    # 7B with mixed-precision Adam: 112 GB of state; 14 GB per GPU at ZeRO-3 over 8
    assert sum(memory_model.sharded_state_bytes(7e9, "mixed adam", memory_model.ParallelLayout()).values()) == 112e9
    assert (
        sum(memory_model.sharded_state_bytes(7e9, "mixed adam", memory_model.ParallelLayout(data=8, zero=3)).values())
        == 14e9
    )
    # tensor 8 x pipeline 4 split the model itself, whatever the ZeRO stage: 70B in 32 parts, ZeRO-1 over 2 replicas
    layout = memory_model.ParallelLayout(data=2, tensor=8, pipeline=4, zero=1)
    assert layout.gpus == 64 and str(layout) == "64 GPUs: data 2 (ZeRO-1) x tensor 8 x pipeline 4"
    assert memory_model.sharded_state_bytes(70e9, "mixed adam", layout) == dict(
        parameters=2 * 70e9 / 32, gradients=2 * 70e9 / 32, optimizer=12 * 70e9 / 32 / 2
    )
    for bad, message in (
        (dict(data=0), "data must be a positive integer"),
        (dict(zero=4), "zero must be a ZeRO stage"),
    ):
        with pytest.raises(ValueError, match=message):
            memory_model.ParallelLayout(**bad)


def test_megatron_fp32_gradients_hold_18_bytes_and_its_distributed_optimizer_6_plus_12_over_d():
    """Megatron-LM's docs/source/api-guide/dist_optimizer.md, row "float16 param, fp32 grads": 18 bytes per
    parameter without the distributed optimizer, 6 + 12/d with it (ZeRO-1 over d data-parallel ranks)."""
    recipe = "mixed adam, fp32 grads"
    assert memory_model.bytes_per_parameter(recipe).total == 18
    for d in (1, 2, 8, 64):
        held = memory_model.sharded_state_bytes(64e9, recipe, memory_model.ParallelLayout(data=d, zero=1))
        assert sum(held.values()) == (6 + 12 / d) * 64e9
    replicated = memory_model.sharded_state_bytes(64e9, recipe, memory_model.ParallelLayout(data=8))
    assert sum(replicated.values()) == 18 * 64e9
    assert memory_model.checkpoint_bytes_per_parameter(recipe) == 2 + 4 + 4 + 4  # gradients are not saved


def test_a_layout_divides_activations_by_the_tensor_degree_only():
    sizes = dict(batch=1, seq_len=4096, d_model=4096, n_layers=32, vocab=32000)
    whole = memory_model.estimate_transformer_training(7_000_000_000, "mixed adam", **sizes)
    assert (
        memory_model.estimate_transformer_training(
            7_000_000_000, "mixed adam", **sizes, layout=memory_model.ParallelLayout()
        )
        == whole
    )
    split = memory_model.estimate_transformer_training(
        7_000_000_000, "mixed adam", **sizes, layout=memory_model.ParallelLayout(data=2, tensor=4, pipeline=2, zero=3)
    )
    assert split["activations"] == whole["activations"] // 4  # 1F1B keeps a micro-batch's worth per stage
    assert split["parameters"] == 14_000_000_000 // 16 and split["optimizer"] == 84_000_000_000 // 16
    assert split["total"] == sum(split[k] for k in ("parameters", "gradients", "optimizer", "activations"))
    # without sequence parallelism, 4 values per token and layer stay whole on each of the 4 tensor ranks
    no_sp = memory_model.estimate_transformer_training(
        7_000_000_000, "mixed adam", **sizes,
        layout=memory_model.ParallelLayout(data=2, tensor=4, pipeline=2, zero=3, sequence_parallel=False),
    )  # fmt: skip
    assert no_sp["activations"] == 4096 * ((4 + 14 / 4) * 4096 * 32 + 2 * 32000 / 4) * 2
    assert no_sp["activations"] > 1.6 * split["activations"]  # 7.5 of 18 values, not 4.5
    assert "no sequence parallelism" in str(memory_model.ParallelLayout(tensor=2, sequence_parallel=False))


def _tensor_bytes(state) -> int:
    """Bytes of every tensor in a (nested) state dict, Adam's step counters aside: what a checkpoint writes."""
    if isinstance(state, dict):
        return sum(_tensor_bytes(v) for k, v in state.items() if k != "step")
    if isinstance(state, list | tuple):
        return sum(_tensor_bytes(v) for v in state)
    if isinstance(state, torch.Tensor):
        return (state.to_local() if hasattr(state, "to_local") else state).nbytes
    return 0


def test_a_checkpoint_saves_14_bytes_beside_a_master_copy_and_12_under_fsdp2():
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from labkit.workloads import precision

    per = memory_model.checkpoint_bytes_per_parameter
    assert per("fp32 adam") == 4 + 8
    assert per("mixed adam") == 2 + 4 + 4 + 4  # Megatron-LM, DeepSpeed ZeRO-1/2: 16-bit weights + fp32 master + moments
    assert per("mixed adam, fp32 params") == 4 + 4 + 4  # FSDP2: the fp32 sharded weights are the master copy
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    # a 16-bit model and an optimizer holding the fp32 master copy (labkit's MixedPrecisionAdam, Megatron's layout)
    low = models.MLP(16, 32, 1, 4).to(torch.bfloat16)
    n = models.count_parameters(low)
    opt = precision.MixedPrecisionAdam(low.parameters())
    nn.functional.cross_entropy(low(x.to(torch.bfloat16)), y).backward()
    opt.step()
    assert _tensor_bytes(low.state_dict()) + _tensor_bytes(opt.state_dict()) == per("mixed adam") * n

    # FSDP2 with bf16 compute, on a one-rank process group: its parameters, state dict and gradients stay fp32
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = models.MLP(16, 32, 1, 4)
        fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
        adam = torch.optim.Adam(model.parameters())
        logits = model(x)
        assert logits.dtype == torch.bfloat16  # computed in bf16
        nn.functional.cross_entropy(logits.float(), y).backward()
        adam.step()
        assert all(p.dtype == p.grad.dtype == torch.float32 for p in model.parameters())
        model_state, optim_state = get_state_dict(model, adam)
        assert _tensor_bytes(model_state) + _tensor_bytes(optim_state) == per("mixed adam, fp32 params") * n
    finally:
        dist.destroy_process_group()
