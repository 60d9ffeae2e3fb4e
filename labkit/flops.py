"""Counting FLOPs and arithmetic intensity.

Taught in notebook 00 (counting, MACs vs FLOPs, the roofline) and notebook 01 (a training step is
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

aten = torch.ops.aten


def _cpu_sdpa_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_sdpa_backward_flop(
    grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs
) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


# torch's FlopCounterMode knows the CUDA attention kernels but not the CPU flash-attention kernel that
# F.scaled_dot_product_attention uses on CPUs, so attention would count as 0 FLOPs on a laptop.
# The CPU kernel does the same maths; count it with torch's own formula.
_EXTRA_FORMULAS = {}
if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
    _EXTRA_FORMULAS[aten._scaled_dot_product_flash_attention_for_cpu] = _cpu_sdpa_flop
if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward"):
    _EXTRA_FORMULAS[aten._scaled_dot_product_flash_attention_for_cpu_backward] = _cpu_sdpa_backward_flop


def _run_counted(fn_or_module: Callable, inputs: tuple, kwargs: dict) -> FlopCounterMode:
    if not callable(fn_or_module):
        raise TypeError(f"count_flops() needs a module or a callable, got {type(fn_or_module).__name__}")
    counter = FlopCounterMode(display=False, custom_mapping=_EXTRA_FORMULAS)
    with counter:
        fn_or_module(*inputs, **kwargs)
    return counter


def count_flops(fn_or_module: Callable, *inputs, **kwargs) -> int:
    """FLOPs (2 per multiply-add) of one call ``fn_or_module(*inputs, **kwargs)``, forward and backward.

    Runs the call once under ``FlopCounterMode``; a backward pass inside ``fn`` is counted too,
    so ``count_flops(train_step, x, y)`` counts a whole training step (notebook 01).
    """
    return int(_run_counted(fn_or_module, inputs, kwargs).get_total_flops())


def flops_by_operator(fn_or_module: Callable, *inputs, **kwargs) -> dict[str, int]:
    """FLOPs per ATen operator (``mm``, ``addmm``, ``convolution``, ...) for one call."""
    counts = _run_counted(fn_or_module, inputs, kwargs).get_flop_counts().get("Global", {})
    return {str(op).removeprefix("aten.").split(".")[0]: int(n) for op, n in counts.items()}


def matmul_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    """FLOPs of ``batch`` products of (m×k) by (k×n): 2·m·n·k each."""
    return 2 * batch * m * n * k


def matmul_bytes(m: int, n: int, k: int, dtype: torch.dtype = torch.float32, batch: int = 1) -> int:
    """Minimum bytes moved by a matmul: read both inputs once, write the output once."""
    return batch * (m * k + k * n + m * n) * dtype_bytes(dtype)


def dtype_bytes(dtype: torch.dtype) -> int:
    """Bytes per element of ``dtype`` (4 for float32, 2 for bfloat16, 1 for int8)."""
    return torch.empty((), dtype=dtype).element_size()


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved to or from memory: the x-axis of the roofline (notebook 00)."""
    if bytes_moved <= 0:
        raise ValueError(f"bytes_moved must be positive, got {bytes_moved}")
    return flops / bytes_moved
