"""Lower-precision training and inference, built so that their memory can be measured (notebook `memory`).

- :class:`MixedPrecisionAdam`: bf16/fp16 weights and gradients in the model, an fp32 master copy and
  fp32 Adam moments in the optimizer: the 2 + 2 + 12 bytes per parameter of mixed-precision training.
- :func:`quantize_int8_weight_only`: int8 weights with one fp32 scale per output channel, computed
  with PyTorch's weight-only int8 matmul kernel: 1 byte per weight.
- :func:`quantize_int4_weight_only`: 4-bit weights in groups of ``group_size`` along the input, each group with a
  bf16 scale and zero point (the "tinygemm" layout of gpt-fast and torchao), computed with PyTorch's CPU int4
  kernel: half a byte per weight, plus 4 bytes per group. Notebook `optimisation` times it for decoding.

Notebook `optimisation` measures the *speed* of these ideas with the maintained tools (autocast, torchao); here
the point is where the bytes are, so the state is kept in plain tensors that MemTracker can see.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..core import checks, compat


class MixedPrecisionAdam(torch.optim.Optimizer):
    """Adam over fp32 master weights for a model whose own weights are bf16 or fp16.

    Taught in notebook `memory`.

    ``step`` copies each low-precision gradient into fp32, updates the fp32 master weight with Adam,
    and writes the rounded result back into the model. The state per parameter is the master copy
    and two moments, all fp32: 12 bytes, next to the model's 2-byte weight and 2-byte gradient.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        if lr <= 0:
            raise ValueError(f"lr must be positive, got {lr}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["master"] = p.detach().float()
                    state["exp_avg"] = torch.zeros_like(state["master"])
                    state["exp_avg_sq"] = torch.zeros_like(state["master"])
                state["step"] += 1
                grad = p.grad.float()
                state["exp_avg"].mul_(beta1).add_(grad, alpha=1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias1 = 1 - beta1 ** state["step"]
                bias2 = 1 - beta2 ** state["step"]
                denom = (state["exp_avg_sq"] / bias2).sqrt_().add_(group["eps"])
                state["master"].addcdiv_(state["exp_avg"], denom, value=-group["lr"] / bias1)
                p.copy_(state["master"])  # rounds to the model's precision
        return None


class Int8WeightOnlyLinear(nn.Module):
    """A linear layer storing int8 weights and one scale per output channel (symmetric, per channel)."""

    weight_int8: torch.Tensor  # buffers, registered in __init__
    scale: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, linear: nn.Linear):
        super().__init__()
        w = linear.weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-12)  # (out,)
        self.register_buffer("weight_int8", (w / scale[:, None]).round().clamp(-128, 127).to(torch.int8))
        self.register_buffer("scale", scale)
        self.register_buffer("bias", linear.bias.detach().float().clone() if linear.bias is not None else None)
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out)
        flat = x.reshape(-1, self.in_features)
        y = compat.int8_weight_matmul(flat, self.weight_int8, self.scale)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)


def _replace_linears(model: nn.Module, make, filter_fn=None) -> nn.Module:
    """Replace (in place) each ``nn.Linear`` of ``model`` that ``filter_fn(module, name)`` accepts by ``make(it)``."""
    for name, child in model.named_children():
        if isinstance(child, nn.Linear):
            if filter_fn is None or filter_fn(child, name):
                setattr(model, name, make(child))
        else:
            _replace_linears(child, make, filter_fn)
    return model


def quantize_int8_weight_only(model: nn.Module) -> nn.Module:
    """Replace every ``nn.Linear`` of ``model`` (in place) by :class:`Int8WeightOnlyLinear`. Taught in notebook `memory`."""
    return _replace_linears(model, Int8WeightOnlyLinear)


def int8_overhead_bytes(model: nn.Module) -> int:
    """Bytes of the per-channel scales and fp32 biases that int8 weight-only quantization keeps.

    Taught in notebook `memory`.
    """
    return sum(
        m.scale.nbytes + (m.bias.nbytes if m.bias is not None else 0)
        for m in model.modules()
        if isinstance(m, Int8WeightOnlyLinear)
    )


class Int4WeightOnlyLinear(nn.Module):
    """A linear layer storing 4-bit weights, asymmetric per group of ``group_size`` inputs (CPU only).

    Taught in notebook `optimisation`. Each group of weights w is stored as q in 0..15 with w ≈ (q − 8)·scale + zero,
    scale = (max − min)/15 and zero = min + 8·scale, packed two to a byte by
    ``torch.ops.aten._convert_weight_to_int4pack_for_cpu`` and multiplied by ``_weight_int4pack_mm_for_cpu`` (the
    kernel torchao's former CPU int4 layout called), which takes and returns bf16 activations.
    """

    packed: torch.Tensor
    scales_and_zeros: torch.Tensor

    def __init__(self, linear: nn.Linear, group_size: int = 128):
        super().__init__()
        out_f, in_f = linear.weight.shape
        if linear.weight.device.type != "cpu":
            raise ValueError(
                f"the int4 weight-only kernel here is PyTorch's CPU one; got a {linear.weight.device} layer"
            )
        if group_size not in (32, 64, 128, 256) or in_f % group_size or out_f % 8:
            raise ValueError(
                f"int4 groups need group_size in 32, 64, 128 or 256 dividing in_features, and out_features a "
                f"multiple of 8; got group_size={group_size!r} for a {in_f} -> {out_f} layer"
            )
        w = linear.weight.detach().float().reshape(out_f, in_f // group_size, group_size)
        low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
        scale = ((high - low) / 15).clamp(min=1e-8)
        q = ((w - low) / scale).round().clamp(0, 15).to(torch.int32).reshape(out_f, in_f)
        self.register_buffer("packed", torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 2))
        zero = low + 8 * scale
        sz = torch.stack([scale[..., 0].t(), zero[..., 0].t()], dim=-1)  # (in / group, out, 2)
        self.register_buffer("scales_and_zeros", sz.to(torch.bfloat16).contiguous())
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        self.in_features, self.out_features, self.group_size = in_f, out_f, group_size

    def dequantized(self) -> torch.Tensor:
        """The float32 weights the layer computes with (out, in): what quantization kept of the original."""
        eye = torch.eye(self.in_features, dtype=torch.bfloat16)
        return self._matmul(eye).float().t()

    def _matmul(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int4pack_mm_for_cpu(x, self.packed, self.group_size, self.scales_and_zeros)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in) -> (..., out), in x's dtype
        y = self._matmul(x.reshape(-1, self.in_features).to(torch.bfloat16)).to(x.dtype)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)


def quantize_int4_weight_only(model: nn.Module, group_size: int = 128, filter_fn=None) -> nn.Module:
    """Replace the ``nn.Linear`` layers of ``model`` (in place) by :class:`Int4WeightOnlyLinear`.

    Taught in notebook `optimisation`. ``filter_fn(module, name)``, as in torchao's ``quantize_``, chooses which
    (default: all); a layer the kernel cannot take is an error that says why.
    """
    return _replace_linears(model, lambda linear: Int4WeightOnlyLinear(linear, group_size), filter_fn)


WEIGHT_FORMATS = ("fp32", "bf16", "int8", "int4")


def weight_bytes(out_features: int, in_features: int, fmt: str, group_size: int = 128) -> int:
    """Bytes a linear layer's weight takes (and a decode step at batch 1 reads) in format ``fmt``.

    Taught in notebook `optimisation`. fp32 4 bytes a weight, bf16 2; int8 (:class:`Int8WeightOnlyLinear`) 1, plus
    a float32 scale per output channel; int4 (:class:`Int4WeightOnlyLinear`) half a byte, plus a bf16 scale and
    zero point per group of ``group_size`` inputs and output.
    """
    n = checks.whole("out_features", out_features) * checks.whole("in_features", in_features)
    if fmt not in WEIGHT_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(WEIGHT_FORMATS)}; got {fmt!r}")
    if fmt == "int4":
        return n // 2 + (in_features // checks.whole("group_size", group_size)) * out_features * 2 * 2
    return {"fp32": 4 * n, "bf16": 2 * n, "int8": n + 4 * out_features}[fmt]
