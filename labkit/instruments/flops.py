"""Counting FLOPs and arithmetic intensity.

Taught in notebook `start_here` (counting, MACs vs FLOPs, the roofline) and notebook `inference_vs_training` (a training step is
about three forward passes). Counting is done by ``torch.utils.flop_counter.FlopCounterMode``,
which sees every matmul, convolution and attention call that actually runs.

Convention: one multiply-add is **2 FLOPs**. Many papers and model cards quote multiply-adds
(MACs) and call them "FLOPs": ResNet-18 is "1.8 GFLOPs" in the ResNet paper and 3.6 GFLOPs here.
Divide our count by 2 to compare with such a figure. Element-wise work (activations, norms,
optimiser updates) is not counted: it is usually bound by memory traffic, not arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from ..core import checks, compat
from ..core.compat import TorchDispatchMode, tree_leaves


def _cpu_sdpa_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_sdpa_backward_flop(
    grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs
) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _native_mha_flop(query_shape, key_shape, value_shape, embed_dim, *args, out_shape=None, **kwargs) -> int:
    # nn.MultiheadAttention's inference fast path: input projections, attention, output projection.
    b, t_q, e = query_shape
    t_k = key_shape[1]
    projections = 2 * b * t_q * e * e + 2 * (2 * b * t_k * e * e) + 2 * b * t_q * e * e  # q, k and v, out
    attention = 2 * (2 * b * t_q * t_k * e)  # q @ k^T and weights @ v, all heads together
    return projections + attention


# torch's FlopCounterMode knows the CUDA attention kernels but not the CPU flash-attention kernel that
# F.scaled_dot_product_attention uses on CPUs, so attention would count as 0 FLOPs on a laptop.
# The CPU kernel does the same maths; count it with torch's own formula. Likewise the fused
# inference path of nn.MultiheadAttention (used by torchvision's ViT under no_grad) counted 0.
_FORMULAS: tuple[Callable[..., int], ...] = (_native_mha_flop, _cpu_sdpa_flop, _cpu_sdpa_backward_flop)
_EXTRA_FORMULAS = {
    op: formula
    for op, formula in zip(map(compat.aten_op, compat.CPU_ATTENTION_OPS), _FORMULAS, strict=True)
    if op is not None
}


def _run_counted(fn_or_module: Callable, inputs: tuple, kwargs: dict) -> FlopCounterMode:
    if not callable(fn_or_module):
        raise TypeError(f"count_flops() needs a module or a callable, got {type(fn_or_module).__name__}")
    counter = FlopCounterMode(display=False, custom_mapping=_EXTRA_FORMULAS)
    with counter:
        fn_or_module(*inputs, **kwargs)
    return counter


def count_flops(fn_or_module: Callable, *inputs, **kwargs) -> int:
    """FLOPs (2 per multiply-add) of one call ``fn_or_module(*inputs, **kwargs)``, forward and backward.

    Taught in notebook `start_here`.

    Runs the call once under ``FlopCounterMode``; a backward pass inside ``fn`` is counted too,
    so ``count_flops(train_step, x, y)`` counts a whole training step (notebook `inference_vs_training`).
    """
    checks.function("fn_or_module", fn_or_module)
    return int(_run_counted(fn_or_module, inputs, kwargs).get_total_flops())


def flops_by_operator(fn_or_module: Callable, *inputs, **kwargs) -> dict[str, int]:
    """FLOPs per ATen operator (``mm``, ``addmm``, ``convolution``, ...) for one call."""
    checks.function("fn_or_module", fn_or_module)
    counts = _run_counted(fn_or_module, inputs, kwargs).get_flop_counts().get("Global", {})
    return {str(op).removeprefix("aten.").split(".")[0]: int(n) for op, n in counts.items()}


class _TrafficCounter(TorchDispatchMode):
    """Adds up, for every operator that runs, the bytes of the tensors it reads and writes."""

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        input_storages = {t.untyped_storage().data_ptr() for t in inputs}
        if outputs and all(t.untyped_storage().data_ptr() in input_storages for t in outputs):
            return out  # a view (transpose, reshape, slice...): no data moves
        seen = set()
        for t in inputs + outputs:
            key = (t.untyped_storage().data_ptr(), t.storage_offset(), t.numel())
            if key not in seen:
                seen.add(key)
                self.bytes += t.numel() * t.element_size()
        return out


def count_memory_traffic(fn_or_module: Callable, *inputs, **kwargs) -> int:
    """Bytes read and written by every operator of one call, if nothing stayed in cache (notebook `model_size`).

    Each operator is charged for reading its tensor inputs (weights included) and writing its
    outputs; views move nothing. Real kernels fuse operators and reuse caches, so this is an upper
    bound of memory traffic, and FLOPs ÷ this is a lower bound of arithmetic intensity. torch has
    a FLOP counter but no byte counter, hence this small one.
    """
    if not callable(fn_or_module):
        raise TypeError(f"count_memory_traffic() needs a module or a callable, got {type(fn_or_module).__name__}")
    counter = _TrafficCounter()
    with counter:
        fn_or_module(*inputs, **kwargs)
    return counter.bytes


def matmul_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    """FLOPs of ``batch`` products of (m×k) by (k×n): 2·m·n·k each."""
    for name, value in dict(m=m, n=n, k=k, batch=batch).items():
        checks.whole(name, value)
    return 2 * batch * m * n * k


def attention_training_flops_per_token(n_layers: int, context: int, d_model: int) -> int:
    """Attention's training FLOPs per token, as PyTorch's FLOP counter counts a fused attention kernel: 14 ·
    n_layers · context · d_model. Taught in notebook `inference_vs_training`.

    Per layer and token, forward: q·kᵀ and the weighted sum of v, 2 · context · d_model FLOPs each (over the whole
    square: the count ignores a causal mask); backward: five such products, because the fused kernel recomputes
    q·kᵀ instead of storing it (``sdpa_backward_flop_count``). That is 7 products, 14 · context · d_model. Kaplan et
    al. (2020, Table 1) write 2 · n_layers · n_ctx · d_attn for the forward ("Attention: Mask", with no derivation),
    6 · n_layers · n_ctx · d_attn in training; the full-square count without recomputation would be 12.
    """
    for name, value in dict(n_layers=n_layers, context=context, d_model=d_model).items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return (2 + 5) * 2 * n_layers * context * d_model


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved to or from memory: the x-axis of the roofline (notebook `start_here`)."""
    checks.amount("flops", flops)
    checks.positive("bytes_moved", bytes_moved)
    return flops / bytes_moved
