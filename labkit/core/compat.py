"""The private PyTorch internals labkit relies on, in one place, each with the public fallback or the reason.

PyTorch promises nothing about names that start with an underscore; a new release may move or change them.
Everything labkit touches of that kind is reached through this module, and ``tests/test_compat.py`` is the
canary: after a PyTorch upgrade it fails, naming what moved, before a notebook breaks in front of a learner.

- :func:`repeatable_mem_tracker`: ``torch.distributed._tools.mem_tracker.MemTracker`` (public in spirit: it
  is PyTorch's own memory tracker, but lives under ``_tools``), with one private hook overridden;
- :func:`fake_tensor_mode`: ``torch._subclasses.fake_tensor.FakeTensorMode``, tensors without storage;
- :func:`int8_weight_matmul`: ``torch._weight_int8pack_mm``, the CPU int8-weight kernel (else dequantise);
- :func:`aten_op`: private aten operators whose FLOPs ``FlopCounterMode`` does not count (CPU attention);
- ``TorchDispatchMode`` and ``tree_leaves`` (``torch.utils._python_dispatch``, ``torch.utils._pytree``): how
  ``count_memory_traffic`` sees every operator's inputs and outputs, as ``FlopCounterMode`` itself does;
- :func:`has_triton` (``torch.utils._triton``) and the backend questions around it: :func:`native_bf16`,
  :func:`compile_unsupported`, :func:`first_failure`: what a device lacks, asked before a notebook needs it.
"""

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: F401 (the base of flops' traffic counter)
from torch.utils._pytree import tree_leaves  # noqa: F401 (every tensor in an operator's nested arguments)

# The private names, so that the canary test and a reader see the whole list at once.
MEM_TRACKER_HOOK = "_pre_fw_hook"  # MemTracker's per-module forward hook, overridden below
INT8_WEIGHT_MATMUL = "_weight_int8pack_mm"
CPU_ATTENTION_OPS = (
    "_native_multi_head_attention",  # nn.MultiheadAttention's fused inference path (torchvision's ViT)
    "_scaled_dot_product_flash_attention_for_cpu",  # F.scaled_dot_product_attention on a CPU
    "_scaled_dot_product_flash_attention_for_cpu_backward",
)


def repeatable_mem_tracker():
    """A fresh tracker of the class :func:`_repeatable_tracker_class` builds once (see there)."""
    return _repeatable_tracker_class()()


@functools.cache
def _repeatable_tracker_class():
    """A MemTracker that allows one model to be called several times within one measurement.

    MemTracker keeps per-module statistics and refuses a second forward call of a top-level module
    ("multiple iterative calls"), which gradient accumulation (notebook `batch_size`) and token-by-token
    generation (notebook `latency_throughput`) both make. labkit only reads the tracker's global snapshots, so on a
    repeated top-level call the module's own statistics are started afresh instead; the global
    current and peak memory are unaffected. Imported on first use: the import costs about 1.5 s,
    which a worker process that never measures memory should not pay.
    """
    from torch.distributed._tools.mem_tracker import MemTracker

    class RepeatableMemTracker(MemTracker):
        def _pre_fw_hook(self, module, inputs) -> None:
            if module in self.memory_tracking and not self._mod_tracker.is_bw:
                name = self._mod_tracker.get_known_fqn(module)
                if set(self._mod_tracker.parents) - {name} == {"Global"}:
                    del self.memory_tracking[module]
            super()._pre_fw_hook(module, inputs)

    return RepeatableMemTracker


def fake_tensor_mode():
    """``FakeTensorMode()``: inside it, tensors have shapes and dtypes but no storage."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode()


def has_int8_weight_matmul() -> bool:
    """True where this PyTorch has the CPU kernel that multiplies by int8 weights without dequantising."""
    return hasattr(torch, INT8_WEIGHT_MATMUL)


def int8_weight_matmul(x: torch.Tensor, weight_int8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ (weight_int8 · scale[:, None]).T`` for x (rows, in), weight (out, in) int8, scale (out,).

    On a CPU with the kernel, the int8 weights are read as they are (a quarter of the bytes of float32);
    elsewhere the weights are dequantised first: the same answer, but the layer's weights are briefly held in
    x's precision.
    """
    if x.device.type == "cpu" and has_int8_weight_matmul():
        return getattr(torch, INT8_WEIGHT_MATMUL)(x, weight_int8, scale.to(x.dtype))
    return x @ (weight_int8.to(x.dtype) * scale.to(x.dtype)[:, None]).T


def aten_op(name: str):
    """The private aten operator ``name``, or None where this PyTorch has none by that name."""
    return getattr(torch.ops.aten, name, None)


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` has bf16 arithmetic units (not emulation): CPUs yes, NVIDIA GPUs from compute 8.0.

    Taught in notebook `fused_attention` (which computes in bf16 only where this says so).
    ``torch.cuda.is_bf16_supported()`` also answers True where bf16 is only emulated (a T4) unless asked for
    ``including_emulation=False``, which older PyTorch lacks; then the compute capability decides.
    """
    device = torch.device(device)
    if device.type != "cuda":
        return device.type == "cpu"
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # PyTorch before 2.3
        return torch.version.hip is not None or torch.cuda.get_device_capability(device) >= (8, 0)


def has_triton() -> bool:
    """Whether Triton, which ``torch.compile`` needs to generate GPU kernels, is installed and usable."""
    try:
        from torch.utils._triton import has_triton as _has_triton
    except ImportError:
        return False
    return bool(_has_triton())


def compile_unsupported(device: torch.device | str) -> str | None:
    """Why ``torch.compile`` (its default backend, inductor) cannot build code for ``device`` here; None if it can.

    Taught in notebook `optimisation`. Only what can be known without compiling: inductor writes C++ for a CPU (a compiler must be on PATH) and
    Triton kernels for a GPU (Triton must be installed, and needs compute capability 7.0 or later). A notebook
    still runs its compiled variant under :func:`first_failure`, since a backend can fail in other ways.
    """
    import shutil

    device = torch.device(device)
    if device.type == "cpu":
        if not any(shutil.which(cxx) for cxx in ("g++", "c++", "clang++", "cl")):
            return "inductor turns CPU code into C++, and no C++ compiler (g++, clang++, cl) is on PATH"
        return None
    if device.type == "cuda":
        if not has_triton():
            return "inductor writes GPU kernels in Triton, which this installation lacks"
        if torch.version.hip is None and torch.cuda.get_device_capability(device) < (7, 0):
            return "Triton needs an NVIDIA GPU of compute capability 7.0 or later"
        return None
    return f"labkit runs torch.compile on CPUs and CUDA GPUs only, not on {device.type!r}"


def first_failure(fn, *args) -> str | None:
    """Run ``fn(*args)``; None if it worked, else the error in one line (its type and first line of message).

    For a variant a backend may lack (an int8 kernel on MPS, a compiler that fails): the notebook says why it is
    left out and goes on, rather than stopping the lesson. Taught in notebook `optimisation`.
    """
    try:
        fn(*args)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__
    return None
