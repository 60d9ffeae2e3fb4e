"""Lower-precision training and inference, built so that their memory can be measured (notebook `memory`).

- :class:`MixedPrecisionAdam`: bf16/fp16 weights and gradients in the model, an fp32 master copy and
  fp32 Adam moments in the optimizer: the 2 + 2 + 12 bytes per parameter of mixed-precision training.
- :func:`quantize_int8_weight_only`: int8 weights with one fp32 scale per output channel, computed
  with PyTorch's weight-only int8 matmul kernel: 1 byte per weight.

Notebook `optimisation` measures the *speed* of these ideas with the maintained tools (autocast, torchao); here
the point is where the bytes are, so the state is kept in plain tensors that MemTracker can see.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..core import compat


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


def quantize_int8_weight_only(model: nn.Module) -> nn.Module:
    """Replace every ``nn.Linear`` of ``model`` (in place) by :class:`Int8WeightOnlyLinear`. Taught in notebook `memory`."""
    for name, child in model.named_children():
        if isinstance(child, nn.Linear):
            setattr(model, name, Int8WeightOnlyLinear(child))
        else:
            quantize_int8_weight_only(child)
    return model


def int8_overhead_bytes(model: nn.Module) -> int:
    """Bytes of the per-channel scales and fp32 biases that int8 weight-only quantization keeps.

    Taught in notebook `memory`.
    """
    return sum(
        m.scale.nbytes + (m.bias.nbytes if m.bias is not None else 0)
        for m in model.modules()
        if isinstance(m, Int8WeightOnlyLinear)
    )
