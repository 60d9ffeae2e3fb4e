"""Attention three ways: naive (the T×T scores in memory), tiled with an online softmax, and fused.

Taught in notebook `fused_attention`.

- :func:`naive_attention` is the textbook formula, softmax(Q·Kᵀ/√d)·V, as three kernels: the scores and their
  softmax are each a (heads, T, T) tensor in memory.
- :func:`tiled_attention` computes the same output a tile of queries and a tile of keys at a time, keeping only
  a running maximum, a running sum and an accumulator per query row: the online softmax of Milakov &
  Gimelshein ("Online normalizer calculation for softmax", 2018), as FlashAttention uses it (Dao et al.,
  "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness", NeurIPS 2022, Algorithm 1).
  Written in plain PyTorch so every step shows; the tiles are separate kernels here, which a fused kernel is not.
- :func:`naive_peak_bytes` and :func:`tiled_peak_bytes` predict each one's peak memory from the tensors its code
  keeps alive, to the byte (the tests compare them with MemTracker's count); :func:`softmax_traffic_bytes` is the
  bytes a softmax reads and writes, fused or as four separate operators.

``torch.nn.functional.scaled_dot_product_attention`` is the fused kernel. Which kernel it runs depends on the
machine and the inputs, so :func:`sdpa_backend` asks ``torch.profiler`` which one ran: on a CPU PyTorch's own
tiled ("flash") kernel; on an NVIDIA GPU the first of PyTorch's priority order that accepts the inputs
(``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``, ``priority_order`` and
``check_prefer_cudnn_attention``, as of PyTorch 2.14, the version ``constraints.txt`` pins; the rule changes between
releases: PyTorch 2.5 put cuDNN's attention first on H100s, pytorch/pytorch#138522 made it opt-in after bugs,
#162073 made it the default again on compute capability 9.0 and 10.0, and the cuDNN 9.15.1 floor, #169849, came
later): with a runtime cuDNN of 9.15.1 or newer on compute capability 9.x or 10.x
(H100, H200, B200; builds for CUDA 12 only x.0 and x.3) cuDNN's attention comes first, then FlashAttention-2, the
memory-efficient kernel and the math fallback, unless ``TORCH_CUDNN_SDPA_DEPRIORITIZED=1``; elsewhere
FlashAttention-2 comes first (16-bit inputs on an A100 or newer), then the memory-efficient kernel (float32
inputs, or older GPUs), then math. :func:`cudnn_version_name` turns the number ``torch.backends.cudnn.version()``
reports into the release it names.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from ..core import checks


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in dict(q=q, k=k, v=v).items():
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise ValueError(f"{name} must be a 3-D tensor (batch x heads, tokens, head dim), got {t!r:.60}")
    if not (q.shape == k.shape == v.shape):
        raise ValueError(f"q, k and v must have one shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(Q·Kᵀ/√d)·V with the scores in memory: (batch×heads, T, d) tensors in, the same shape out.

    Taught in notebook `fused_attention`. One expression, so its temporaries are freed as soon as the next operator
    has read them: the scores (T×T per head) live until their softmax exists, then the softmax until the product.
    """
    _check_qkv(q, k, v)
    return torch.softmax((q * q.shape[-1] ** -0.5) @ k.transpose(1, 2), dim=-1) @ v


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int = 128) -> torch.Tensor:
    """The same output as :func:`naive_attention`, ``block`` queries by ``block`` keys at a time (online softmax).

    Taught in notebook `fused_attention`. For each tile of queries it keeps, per row, the largest score so far
    (``m``), the sum of exp(score − m) so far (``l``) and the weighted sum of values so far (``acc``); each new
    tile of keys rescales them by exp(m_old − m_new). Nothing of size T×T is ever made. Operators run in place
    where they can and each tile is deleted before the next is made, so the live tensors are the ones
    :func:`tiled_peak_bytes` lists.
    """
    _check_qkv(q, k, v)
    checks.whole("block", block)
    bh, t, d = q.shape
    out = torch.empty_like(q)
    for i in range(0, t, block):
        qi = q[:, i : i + block] * d**-0.5
        m = torch.full((bh, qi.shape[1], 1), -math.inf, dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)  # the paper's name
        acc = torch.zeros_like(qi)
        for j in range(0, t, block):
            s = torch.bmm(qi, k[:, j : j + block].transpose(1, 2))  # one tile of scores
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            c = (m - m_new).exp_()  # how much the old running sums shrink
            s.sub_(m_new).exp_()  # the tile's unnormalised probabilities, in place
            l.mul_(c).add_(s.sum(-1, keepdim=True))
            acc.mul_(c).add_(torch.bmm(s, v[:, j : j + block]))
            m = m_new
            del s, m_new, c
        out[:, i : i + block] = acc.div_(l)
        del qi, m, l, acc
    return out


def naive_peak_bytes(batch_heads: int, tokens: int, head_dim: int, itemsize: int = 4) -> int:
    """Peak bytes :func:`naive_attention` adds to its inputs: two (T×T) tensors per head, or the output beside one.

    Taught in notebook `fused_attention`. The scaled queries and the scores (T·d + T²), then the scores and their
    softmax (2·T²), then the softmax and the output (T² + T·d): the largest of the three, per head.
    """
    for name, value in dict(batch_heads=batch_heads, tokens=tokens, head_dim=head_dim, itemsize=itemsize).items():
        checks.whole(name, value)
    t, d = tokens, head_dim
    return batch_heads * itemsize * max(t * d + t * t, 2 * t * t, t * t + t * d)


def tiled_peak_bytes(batch_heads: int, tokens: int, head_dim: int, block: int, itemsize: int = 4) -> int:
    """Peak bytes :func:`tiled_attention` adds to its inputs: the output, and one tile's working set.

    Taught in notebook `fused_attention`. The output (T·d) and, at the moment the tile's values are weighted, the
    scaled query tile, its accumulator and the weighted values (3·b·d), one tile of scores (b²) and four vectors of
    b (m, l, the new maximum, the rescale factor), with b = min(block, T): linear in T, where the naive kernel's is
    quadratic.
    """
    for name, value in dict(
        batch_heads=batch_heads, tokens=tokens, head_dim=head_dim, block=block, itemsize=itemsize
    ).items():
        checks.whole(name, value)
    b = min(block, tokens)
    return batch_heads * itemsize * (tokens * head_dim + 3 * b * head_dim + b * b + 4 * b)


def attention_flops(batch_heads: int, tokens: int, head_dim: int) -> int:
    """FLOPs of Q·Kᵀ and of the weighted sum of V: 2·T²·d each, per head (the softmax's few per score aside).

    Taught in notebook `fused_attention`.
    """
    for name, value in dict(batch_heads=batch_heads, tokens=tokens, head_dim=head_dim).items():
        checks.whole(name, value)
    return 4 * batch_heads * tokens * tokens * head_dim


def unfused_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension as four separate operators: max, subtract-and-exp, sum, divide.

    Taught in notebook `fused_attention`. Each operator reads its input from memory and writes its output back;
    ``torch.softmax`` does the same arithmetic in one pass per row.
    """
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def softmax_traffic_bytes(rows: int, columns: int, fused: bool, itemsize: int = 4) -> int:
    """Bytes a softmax over ``rows`` rows of ``columns`` reads and writes, if nothing stays in cache.

    Taught in notebook `fused_attention`. Fused (``torch.softmax``): read the input once, write the output once,
    2·N elements for N = rows·columns. Unfused (:func:`unfused_softmax`): max reads N and writes one per row;
    subtract reads N and the maxima, writes N; exp reads and writes N; sum reads N and writes one per row; divide
    reads N and the sums, writes N: 8·N + 4·rows elements. ``labkit.count_memory_traffic`` counts the same.
    """
    for name, value in dict(rows=rows, columns=columns, itemsize=itemsize).items():
        checks.whole(name, value)
    n = rows * columns
    return itemsize * (2 * n if fused else 8 * n + 4 * rows)


# The aten operator F.scaled_dot_product_attention dispatches to, and the kernel behind it (PyTorch's
# aten/src/ATen/native/transformers/attention.cpp dispatches on the choice sdp_utils.cpp makes).
SDPA_BACKENDS: dict[str, str] = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "PyTorch's CPU flash attention",
    "aten::_scaled_dot_product_cudnn_attention": "cuDNN attention",
    "aten::_scaled_dot_product_flash_attention": "FlashAttention-2",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient attention (xFormers' kernel)",
    "aten::_scaled_dot_product_attention_math": "math (unfused: the scores in memory)",
    "aten::_scaled_dot_product_attention_math_for_mps": "PyTorch's MPS attention",
    "aten::_scaled_dot_product_fused_attention_overrideable": "a device plug-in's fused attention",
}
_FLASH_IMPLS = {"FA3": "FlashAttention-3", "FA4": "FlashAttention-4"}
_ROCM_KERNELS = {  # on ROCm the same two operators run AMD's kernels (sdp_utils.cpp, USE_ROCM_ATTENTION)
    "aten::_scaled_dot_product_flash_attention": "flash attention (AOTriton or Composable Kernel, ROCm)",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient attention (AOTriton or Composable Kernel, ROCm)",
}


def sdpa_backend_name(op_names: Iterable[str], flash_impl: str | None = None, rocm: bool = False) -> str:
    """The kernel ``F.scaled_dot_product_attention`` ran, from the names of the operators a profile recorded.

    How :func:`sdpa_backend` (notebook `fused_attention`) reads a profile: the first name that is a key of
    ``SDPA_BACKENDS`` decides. On CUDA ``aten::_scaled_dot_product_flash_attention`` is FlashAttention-2 unless
    another implementation was activated with ``torch.nn.attention.activate_flash_attention_impl`` (``flash_impl``
    "FA3" or "FA4"); on ROCm (``rocm=True``) the flash and memory-efficient operators run AOTriton's or Composable
    Kernel's kernels.
    """
    if isinstance(op_names, str) or not isinstance(op_names, Iterable):
        raise TypeError(f"op_names must be operator names (e.g. a profile's event names), got {op_names!r:.60}")
    if flash_impl is not None and not isinstance(flash_impl, str):
        raise TypeError(f"flash_impl must be None or an implementation's name such as 'FA3', got {flash_impl!r}")
    names = list(op_names)
    for name in names:
        if name in SDPA_BACKENDS:
            if rocm and name in _ROCM_KERNELS:
                return _ROCM_KERNELS[name]
            if name == "aten::_scaled_dot_product_flash_attention" and flash_impl is not None:
                return _FLASH_IMPLS.get(flash_impl, f"flash attention ({flash_impl})")
            return SDPA_BACKENDS[name]
    seen = sorted({n for n in names if "attention" in n}) or "none with attention in its name"
    raise ValueError(
        f"op_names holds no scaled_dot_product_attention backend (one of {sorted(SDPA_BACKENDS)}); "
        f"attention operators among them: {seen}"
    )


def sdpa_backend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    backends: SDPBackend | list[SDPBackend] | None = None,
) -> str:
    """Which kernel ``F.scaled_dot_product_attention(q, k, v)`` runs on these inputs here, read from the profiler.

    Taught in notebook `fused_attention`. Runs the call once under ``torch.profiler`` (CPU activity only: the
    operator is dispatched on the host, whatever device runs it) and names the backend operator it recorded
    (:func:`sdpa_backend_name`). ``backends`` restricts the choice as ``torch.nn.attention.sdpa_kernel`` does,
    e.g. ``SDPBackend.MATH`` or ``[SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]``.
    """
    for name, t in dict(q=q, k=k, v=v).items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor (..., tokens, head dim), got {type(t).__name__}")
    chosen = [backends] if isinstance(backends, SDPBackend) else backends
    if chosen is not None and (
        not isinstance(chosen, list) or not chosen or not all(isinstance(b, SDPBackend) for b in chosen)
    ):
        allowed = ", ".join(f"SDPBackend.{n}" for n in SDPBackend.__members__ if n != "ERROR")
        raise ValueError(f"backends must be None, an SDPBackend or a list of them ({allowed}); got {backends!r}")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        if chosen is None:
            torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            with sdpa_kernel(chosen):
                torch.nn.functional.scaled_dot_product_attention(q, k, v)
    current = getattr(torch.nn.attention, "current_flash_attention_impl", lambda: None)
    return sdpa_backend_name((e.name for e in prof.events()), current(), torch.version.hip is not None)


def cudnn_version_name(version: int) -> str:
    """The cuDNN release a ``torch.backends.cudnn.version()`` number names: 91900 is "9.19.0", 8907 "8.9.7".

    Taught in notebook `fused_attention`. cuDNN's ``cudnn_version.h`` defines ``CUDNN_VERSION`` as
    major·10000 + minor·100 + patch from cuDNN 9 on, and as major·1000 + minor·100 + patch before it.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1000:
        raise ValueError(f"version must be a cuDNN version number such as 91900 (cuDNN 9.19.0), got {version!r}")
    if version >= 90000:
        return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    return f"{version // 1000}.{version // 100 % 10}.{version % 100}"
