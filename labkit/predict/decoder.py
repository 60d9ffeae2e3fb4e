"""Real decoder models' shapes: exact parameter counts, KV-cache bytes, and how many sequences fit a GPU.

Taught in notebook `serving_llms` (and used by notebook `estimating_a_job`). :class:`DecoderSpec` holds a
decoder-only transformer's published shape; :data:`LLAMA2_7B` and :data:`LLAMA2_70B` are Llama 2's (Touvron et
al., 2023, Table 1, and the released configs); :func:`max_concurrent_sequences` divides a GPU's memory left after
the weights by a sequence's cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .memory_model import kv_cache_bytes


@dataclass(frozen=True)
class DecoderSpec:
    """A Llama-style decoder's shape: untied embeddings, SwiGLU MLP (three matrices), RMSNorm, no biases.

    Notebook `serving_llms` sizes real models with it. ``kv_heads < n_heads`` is grouped-query attention (GQA).
    """

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    kv_heads: int
    ffn: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def parameters(self) -> int:
        """The exact parameter count: embeddings, per layer attention + MLP + two norms, final norm, output head."""
        d, kv = self.d_model, self.kv_heads * self.head_dim
        attention = d * d + 2 * d * kv + d * d  # q, k, v, o
        per_layer = attention + 3 * d * self.ffn + 2 * d
        return 2 * self.vocab * d + self.n_layers * per_layer + d

    def kv_bytes_per_token(self, bytes_per_value: int = 2, kv_heads: int | None = None) -> int:
        """KV-cache bytes one token adds: a key and a value per layer and key/value head."""
        return kv_cache_bytes(self.n_layers, kv_heads or self.kv_heads, self.head_dim, 1, 1, bytes_per_value)

    def matmul_parameters(self) -> int:
        """The parameters a token multiplies by: all but the input embedding (a lookup) and the norms' gains."""
        return self.parameters() - self.vocab * self.d_model - (2 * self.n_layers + 1) * self.d_model

    def decode_flops_per_token(self, context: int) -> int:
        """FLOPs of one decoded token attending to ``context`` cached ones: 2 per matmul weight, and per layer
        q·kᵀ and the weighted sum of v over the cache, 2·d_model·context each (every query head reads its
        group's keys, so grouped-query attention saves bytes, not FLOPs)."""
        return 2 * self.matmul_parameters() + 4 * self.n_layers * self.d_model * context

    def _step_bytes(self, context: int, bytes_per_value: int) -> tuple[int, int]:
        """A decode step's bytes: the weights, read once, and one sequence's cache of ``context`` tokens."""
        return bytes_per_value * self.parameters(), self.kv_bytes_per_token(bytes_per_value) * context

    def decode_intensity(self, batch: int, context: int, bytes_per_value: int = 2) -> float:
        """FLOP per byte of a decode step at ``batch`` sequences of ``context`` tokens: the weights read once, each
        sequence's cache read once (an engine that writes the cache in place). Taught in notebook `serving_llms`."""
        weights, cache = self._step_bytes(context, bytes_per_value)
        return batch * self.decode_flops_per_token(context) / (weights + batch * cache)

    def batch_to_reach(self, intensity: float, context: int, bytes_per_value: int = 2) -> float:
        """The smallest batch whose decode step reaches ``intensity`` FLOP per byte (a GPU's ridge point), or
        infinity when even an endless batch stays below it (the cache alone sets the limit)."""
        weights, cache = self._step_bytes(context, bytes_per_value)
        surplus = self.decode_flops_per_token(context) - intensity * cache
        return math.inf if surplus <= 0 else math.ceil(intensity * weights / surplus)


# Touvron et al., "Llama 2: Open Foundation and Fine-Tuned Chat Models" (2023), Table 1 (GQA for 34B and 70B), and
# the configurations published with the weights (hidden size, layers, heads, key/value heads, MLP width, vocabulary).
LLAMA2_7B = DecoderSpec("Llama 2 7B", n_layers=32, d_model=4096, n_heads=32, kv_heads=32, ffn=11008, vocab=32000)
LLAMA2_70B = DecoderSpec("Llama 2 70B", n_layers=80, d_model=8192, n_heads=64, kv_heads=8, ffn=28672, vocab=32000)


def max_concurrent_sequences(
    spec: DecoderSpec, gpu_bytes: float, context: int, bytes_per_value: int = 2, kv_heads: int | None = None
) -> int:
    """How many sequences of ``context`` tokens fit beside the weights in ``gpu_bytes``. Taught in notebook `serving_llms`.

    Counts weights and KV cache only (no activations, no framework reserve): an upper bound. 0 when the weights
    alone do not fit. ``kv_heads`` overrides the model's (``n_heads`` shows the model without GQA).
    """
    if gpu_bytes <= 0 or not isinstance(context, int) or context < 1:
        raise ValueError(f"gpu_bytes must be positive and context a positive integer; got {gpu_bytes}, {context!r}")
    free = gpu_bytes - spec.parameters() * bytes_per_value
    per_sequence = spec.kv_bytes_per_token(bytes_per_value, kv_heads) * context
    return max(0, int(free // per_sequence))
