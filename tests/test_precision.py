import pytest
import torch
import torch.nn as nn

from labkit.instruments import memory
from labkit.predict import memory_model
from labkit.workloads import models, precision


def _relative_error(approx: torch.Tensor, exact: torch.Tensor) -> float:  # ‖approx − exact‖ / ‖exact‖
    return float((approx.float() - exact.float()).norm() / exact.float().norm())


def _step(model, opt, x, y):
    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x).float(), y).backward()
        opt.step()

    return step


def test_mixed_precision_adam_holds_2_2_12_bytes_per_parameter():
    model = models.MLP(32, 64, 2, 4).to(torch.bfloat16)
    opt = precision.MixedPrecisionAdam(model.parameters())
    x, y = torch.randn(16, 32, dtype=torch.bfloat16), torch.randint(0, 4, (16,))
    step = _step(model, opt, x, y)
    step()
    rec = memory.peak_memory(step, track=(model, opt, x, y))
    n = models.count_parameters(model)
    assert rec.resident_by_category["parameters"] == 2 * n
    assert rec.resident_by_category["gradients"] == 2 * n
    assert rec.resident_by_category["optimizer"] == 12 * n  # master copy + two moments, fp32
    expected = memory_model.state_bytes(n, "mixed adam")
    assert expected == dict(parameters=2 * n, gradients=2 * n, optimizer=12 * n)


def test_mixed_precision_adam_tracks_fp32_adam():
    torch.manual_seed(0)
    ref = models.MLP(16, 32, 1, 4)
    low = models.MLP(16, 32, 1, 4).to(torch.bfloat16)
    low.load_state_dict({k: v.to(torch.bfloat16) for k, v in ref.state_dict().items()})
    ref_opt, low_opt = (
        torch.optim.Adam(ref.parameters(), lr=1e-2),
        precision.MixedPrecisionAdam(low.parameters(), lr=1e-2),
    )
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    for _ in range(20):
        _step(ref, ref_opt, x, y)()
        _step(low, low_opt, x.to(torch.bfloat16), y)()
    master = torch.cat([low_opt.state[p]["master"].flatten() for p in low.parameters()])
    exact = torch.cat([p.detach().flatten() for p in ref.parameters()])
    assert _relative_error(master, exact) < 0.05
    with pytest.raises(ValueError, match="lr must be positive"):
        precision.MixedPrecisionAdam(low.parameters(), lr=0)


def test_int8_weight_only_is_one_byte_per_weight_and_close_to_fp32():
    torch.manual_seed(0)
    model = models.MLP(64, 128, 2, 10).eval()
    x = torch.randn(8, 64)
    with torch.no_grad():
        exact = model(x)
        weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
        precision.quantize_int8_weight_only(model)
        approx = model(x)
    assert sum(b.nbytes for n, b in model.named_buffers() if n.endswith("weight_int8")) == weights
    assert _relative_error(approx, exact) < 0.02
    assert precision.int8_overhead_bytes(model) == 4 * (128 + 128 + 10) * 2  # scales and biases, fp32
