"""The canary for PyTorch's private internals: after an upgrade it fails here, naming what moved.

Each test checks one thing labkit reaches through :mod:`labkit.core.compat`, by what it must do, not only that a name
exists: where one fails, update compat.py (and only it) for the new PyTorch.
"""

import pytest
import torch
import torch.nn.functional as F

import labkit
from labkit.core import compat


def test_memtracker_still_has_the_hook_and_state_that_compat_overrides():
    from torch.distributed._tools.mem_tracker import MemTracker

    assert hasattr(MemTracker, compat.MEM_TRACKER_HOOK), f"MemTracker.{compat.MEM_TRACKER_HOOK} is gone"
    tracker = compat.repeatable_mem_tracker()
    assert hasattr(tracker, "memory_tracking") and hasattr(tracker, "_mod_tracker")
    for attr in ("is_bw", "parents", "get_known_fqn"):
        assert hasattr(tracker._mod_tracker, attr), f"MemTracker's module tracker lost {attr}"


def test_a_model_called_twice_in_one_measurement_is_measured():
    """What the override is for: plain MemTracker refuses a second top-level forward call."""
    model = torch.nn.Linear(256, 256)
    x = torch.randn(64, 256)
    record = labkit.peak_memory(lambda: model(model(x)), track=(model,))
    assert record.by_category["activations"] >= 2 * 64 * 256 * 4  # two outputs held at once, at least


def test_fake_tensors_still_have_no_storage():
    with compat.fake_tensor_mode():
        t = torch.empty(1 << 40)  # 4 TiB: only a fake tensor can be this large here
    assert t.shape == (1 << 40,)


@pytest.mark.skipif(not compat.has_int8_weight_matmul(), reason="this PyTorch has no CPU int8-weight kernel")
def test_int8_weight_kernel_equals_dequantised_matmul():
    torch.manual_seed(0)
    x = torch.randn(8, 64)
    w = torch.randint(-128, 128, (32, 64), dtype=torch.int8)
    scale = torch.rand(32) / 100
    kernel = compat.int8_weight_matmul(x, w, scale)
    dequantised = x @ (w.float() * scale[:, None]).T
    torch.testing.assert_close(kernel, dequantised, rtol=1e-4, atol=1e-4)


def test_the_int8_kernel_exists_on_this_pytorch():
    """The fallback keeps notebooks correct, but notebook `optimisation`'s int8 speed-up needs the kernel: say it moved."""
    assert compat.has_int8_weight_matmul(), f"torch.{compat.INT8_WEIGHT_MATMUL} is gone: find its new name"


def test_cpu_attention_operators_exist_and_are_counted():
    missing = [name for name in compat.CPU_ATTENTION_OPS if compat.aten_op(name) is None]
    assert not missing, f"aten operators renamed or removed: {missing}"
    q = k = v = torch.randn(1, 2, 16, 8)
    # q @ k^T and weights @ v: 2 x (2 · B·heads·T·T·head_dim) FLOPs, which FlopCounterMode alone counts as 0 on a CPU
    assert labkit.count_flops(F.scaled_dot_product_attention, q, k, v) == 2 * 2 * (1 * 2 * 16 * 16 * 8)


def test_aten_op_of_an_unknown_name_is_none():
    assert compat.aten_op("no_such_operator_anywhere") is None


def test_backend_questions_answer_with_a_reason_a_learner_can_act_on(monkeypatch):
    import shutil

    assert compat.native_bf16("cpu") and not compat.native_bf16("mps")
    assert compat.compile_unsupported("mps") == "labkit runs torch.compile on CPUs and CUDA GPUs only, not on 'mps'"
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "no C++ compiler" in compat.compile_unsupported("cpu")
    assert compat.first_failure(lambda x: x + 1, 1) is None
    failure = compat.first_failure(lambda: torch.ones(2) @ torch.ones(3))
    assert failure.startswith("RuntimeError: ") and "\n" not in failure
