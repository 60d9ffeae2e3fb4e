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


def test_int4_weight_only_rounds_each_group_to_sixteen_levels_and_stores_its_bytes():
    torch.manual_seed(0)
    linear = nn.Linear(256, 64)
    q = precision.Int4WeightOnlyLinear(linear, group_size=64)
    w = linear.weight.detach().reshape(64, 4, 64)
    step = (w.amax(-1) - w.amin(-1)) / 15  # one rounding step per group
    deq = q.dequantized().reshape(64, 4, 64)
    # within half a step (and bf16's rounding of scale and zero) of the original, group by group
    assert ((deq - w).abs() <= (0.5 * step + 4e-3 * w.abs().amax(-1))[..., None]).all()
    assert len(torch.unique(deq[0, 0])) <= 16
    x = torch.randn(5, 256)
    expected = x.to(torch.bfloat16).float() @ q.dequantized().t() + linear.bias.detach()
    torch.testing.assert_close(q(x), expected, atol=2e-2, rtol=2e-2)
    assert _relative_error(q(x), linear(x).detach()) < 0.1
    assert q.packed.nbytes + q.scales_and_zeros.nbytes == precision.weight_bytes(64, 256, "int4", 64)


def test_weight_bytes_per_format_match_what_the_layers_store():
    linear = nn.Linear(512, 128, bias=False)
    i8 = precision.Int8WeightOnlyLinear(linear)
    assert i8.weight_int8.nbytes + i8.scale.nbytes == precision.weight_bytes(128, 512, "int8") == 512 * 128 + 4 * 128
    assert precision.weight_bytes(128, 512, "fp32") == 4 * 512 * 128 == linear.weight.nbytes
    assert precision.weight_bytes(128, 512, "bf16") == linear.weight.to(torch.bfloat16).nbytes
    assert precision.weight_bytes(128, 512, "int4") == 512 * 128 // 2 + (512 // 128) * 128 * 4


def test_int4_quantizes_the_layers_the_filter_chooses_and_refuses_shapes_its_kernel_cannot_take():
    model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 4))
    precision.quantize_int4_weight_only(model, group_size=64, filter_fn=lambda m, name: m.out_features % 8 == 0)
    assert isinstance(model[0], precision.Int4WeightOnlyLinear) and isinstance(model[2], nn.Linear)
    with pytest.raises(ValueError, match="group_size"):
        precision.Int4WeightOnlyLinear(nn.Linear(100, 64))
    with pytest.raises(ValueError, match="out_features a multiple of 8"):
        precision.Int4WeightOnlyLinear(nn.Linear(128, 4), group_size=64)
    with pytest.raises(ValueError, match="fmt must be one of"):
        precision.weight_bytes(8, 8, "int2")
