import pytest
import torch
import torch.nn as nn

from labkit import memory, models
from labkit.timing import MeasurementError


def test_bytes_per_parameter_from_first_principles():
    adam = memory.bytes_per_parameter("fp32 adam")
    assert (adam.parameters, adam.gradients, adam.optimizer, adam.total) == (4, 4, 8, 16)
    assert memory.bytes_per_parameter("mixed adam").total == 16  # 2 + 2 + (4 master + 4 + 4 moments)
    assert memory.bytes_per_parameter("fp32 sgd").total == 8
    assert memory.bytes_per_parameter("bf16 inference").total == 2
    assert memory.bytes_per_parameter("int8 inference").total == 1
    with pytest.raises(ValueError, match="unknown recipe 'adamw'; allowed: fp32 inference"):
        memory.bytes_per_parameter("adamw")


def test_state_bytes_only_trainable_parameters_carry_gradients_and_optimizer_state():
    assert memory.state_bytes(1000, "fp32 adam") == dict(parameters=4000, gradients=4000, optimizer=8000)
    assert memory.state_bytes(1000, "fp32 adam", n_trainable=10) == dict(parameters=4000, gradients=40, optimizer=80)


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
    expected = memory.state_bytes(n, "fp32 adam")
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
