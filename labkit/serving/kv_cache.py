"""The KV cache in paged blocks: a block table per sequence, blocks shared by a common prefix, admission policies.

Taught in notebook `serving_llms`. :class:`PagedKVCache` stores keys and values in fixed-size blocks with a block
table per sequence (vLLM's PagedAttention, Kwon et al., SOSP 2023); a block as long as the whole context is the
older scheme, reserving the maximum length per sequence. Its forward pass is the model's own layers
(:class:`labkit.workloads.models.TinyGPT`), with keys and values read from and written to the blocks, so a decode
step can batch sequences of different lengths. Why hand-rolled: no package a learner's laptop has serves a model
this way (vLLM and its peers need a GPU and download weights).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F

from ..workloads.models import TinyGPT


class CacheFull(RuntimeError):
    """The KV cache has no free block for a sequence that needs one."""


class PagedKVCache:
    """Keys and values of many sequences in fixed-size blocks, each sequence's blocks listed in its block table.

    Taught in notebook `serving_llms`. Blocks are *allocated* only as tokens arrive; what differs is what admission promises:

    - ``admission="reserve"``: a sequence is admitted with the most tokens it may reach (prompt + output limit) and
      promised that many blocks, so it never runs out mid-generation (TensorRT-LLM's ``GUARANTEED_NO_EVICT``).
      With ``block_size`` equal to the context this is the older scheme: one region of the whole context each;
    - ``admission="on-demand"``: nothing is promised; a sequence is admitted when its prompt's blocks are free
      and takes a block whenever it fills one; when none is free the engine pre-empts a sequence (vLLM: allocate
      as tokens arrive, pre-empt by recomputation when blocks run out).

    With ``prefix_caching=True`` every full block is also filed under a hash of its tokens and of all the tokens
    before it (vLLM's automatic prefix caching). A new sequence whose prompt begins with blocks already filed shares
    them (counted references, never written again) and starts its prefill after them; a block no sequence uses
    any more keeps its contents and is reused by a later prompt, or evicted, least recently used first, when a
    free block is needed.
    """

    def __init__(
        self, model: TinyGPT, num_blocks: int, block_size: int, admission: str = "reserve", prefix_caching: bool = False
    ):
        if not isinstance(num_blocks, int) or num_blocks < 1 or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"num_blocks and block_size must be positive integers; got {num_blocks!r}, {block_size!r}")
        if admission not in ("reserve", "on-demand"):
            raise ValueError(f"admission must be 'reserve' or 'on-demand', got {admission!r}")
        self.admission = admission
        first = model.layers()[0]
        self.n_layers, self.n_heads = len(model.blocks), first.n_heads
        self.head_dim = first.qkv.in_features // first.n_heads
        self.num_blocks, self.block_size, self.max_len = num_blocks, block_size, model.max_len
        weight = first.qkv.weight
        shape = (self.n_layers, num_blocks * block_size, self.n_heads, self.head_dim)
        self.k = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.v = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.free: list[int] = list(range(num_blocks - 1, -1, -1))
        self.tables: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}
        self.promised: dict[int, int] = {}
        self.prefix_caching = bool(prefix_caching)
        self.block_of_hash: dict[int, int] = {}  # a full block's chained hash -> the block holding it
        self.hash_of_block: dict[int, int] = {}
        self.refs: dict[int, int] = {}  # filed block -> sequences using it
        self.evictable: OrderedDict[int, None] = OrderedDict()  # filed blocks no sequence uses, oldest first
        self.history: dict[int, list[int]] = {}  # the tokens each sequence has written (with prefix caching)

    @property
    def free_blocks(self) -> int:
        """Blocks a sequence can take: the free ones, and the cached ones no sequence uses (evicted on demand)."""
        return len(self.free) + len(self.evictable)

    def _hashes(self, tokens: Sequence[int]) -> list[int]:
        """The chained hash of each full block of ``tokens``: a block's hash covers every token up to its end."""
        out, h, bs = [], 0, self.block_size
        for i in range(len(tokens) // bs):
            h = hash((h, tuple(tokens[i * bs : (i + 1) * bs])))
            out.append(h)
        return out

    @property
    def bytes(self) -> int:
        """Bytes of the whole pool (keys and values)."""
        return self.k.nbytes + self.v.nbytes

    @property
    def bytes_per_token(self) -> int:
        return 2 * self.n_layers * self.n_heads * self.head_dim * self.k.element_size()

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def can_admit(self, max_tokens: int, now_tokens: int | None = None, keep_free: int = 0) -> bool:
        """Whether a sequence that may grow to ``max_tokens`` tokens can be admitted now.

        Reserving: its ``max_tokens`` blocks can be promised beside every earlier promise. On demand: the blocks
        of its first ``now_tokens`` tokens are free, beyond ``keep_free`` blocks the running sequences need.
        """
        if self.admission == "on-demand":
            return self.blocks_for(max_tokens if now_tokens is None else now_tokens) <= self.free_blocks - keep_free
        outstanding = sum(self.promised[s] - len(self.tables[s]) for s in self.tables)
        return self.blocks_for(max_tokens) <= self.free_blocks - outstanding

    def admit(
        self,
        seq: int,
        max_tokens: int,
        now_tokens: int | None = None,
        keep_free: int = 0,
        prompt: Sequence[int] | None = None,
    ) -> int:
        """Admit ``seq``; with prefix caching and its ``prompt``, share the prompt's cached leading blocks.

        Returns the tokens found cached (0 without prefix caching): the prefill starts after them. The prompt's
        last token is never taken from the cache, so that its prefill has a token whose logits give the next one.
        """
        if seq in self.tables:
            raise ValueError(f"sequence {seq} is already in the cache")
        if max_tokens > self.max_len:
            raise ValueError(f"a sequence of {max_tokens} tokens exceeds the model's context of {self.max_len}")
        if not self.can_admit(max_tokens, now_tokens, keep_free):
            raise CacheFull(f"no room for {self.blocks_for(max_tokens)} blocks for sequence {seq}")
        promise = self.blocks_for(max_tokens) if self.admission == "reserve" else self.blocks_for(self.max_len)
        self.tables[seq], self.lengths[seq], self.promised[seq] = [], 0, promise
        if not self.prefix_caching:
            return 0
        for h in self._hashes(list(prompt or [])[:-1]):
            block = self.block_of_hash.get(h)
            if block is None:
                break
            self.evictable.pop(block, None)
            self.refs[block] += 1
            self.tables[seq].append(block)
        cached = len(self.tables[seq]) * self.block_size
        self.lengths[seq] = cached
        self.history[seq] = list(prompt or [])[:cached]
        return cached

    def blocks_needed(self, seqs: Iterable[int], tokens: int = 1) -> int:
        """New blocks that appending ``tokens`` to each of ``seqs`` takes."""
        return sum(self.blocks_for(self.lengths[s] + tokens) - len(self.tables[s]) for s in seqs)

    def release(self, seq: int) -> None:
        """Give a finished sequence's blocks back (a filed block stays cached until it is needed for another)."""
        unfiled = []
        for block in self.tables.pop(seq):
            if block in self.hash_of_block:
                self.refs[block] -= 1
                if self.refs[block] == 0:
                    self.evictable[block] = None
            else:
                unfiled.append(block)
        self.free.extend(reversed(unfiled))
        del self.lengths[seq], self.promised[seq]
        self.history.pop(seq, None)

    def _take_block(self) -> int:
        if self.free:
            return self.free.pop()
        block, _ = self.evictable.popitem(last=False)  # the least recently used cached block
        del self.block_of_hash[self.hash_of_block.pop(block)], self.refs[block]
        return block

    def _file(self, seq: int, written: Sequence[int]) -> None:
        """File the blocks of ``seq`` that ``written`` tokens have just filled, under their chained hashes."""
        history = self.history[seq]
        before = len(history) // self.block_size
        history.extend(written)
        hashes = self._hashes(history)
        for i in range(before, len(hashes)):
            block = self.tables[seq][i]
            if hashes[i] not in self.block_of_hash and block not in self.hash_of_block:
                self.block_of_hash[hashes[i]], self.hash_of_block[block], self.refs[block] = block, hashes[i], 1

    def _grow(self, seq: int, length: int) -> None:
        table = self.tables[seq]
        while len(table) * self.block_size < length:
            if len(table) >= self.promised[seq] or not self.free_blocks:
                raise CacheFull(f"sequence {seq} needs a block beyond its {self.promised[seq]} promised")
            table.append(self._take_block())

    def _slots(self, seq: int, positions: torch.Tensor) -> torch.Tensor:
        table = torch.tensor(self.tables[seq], device=positions.device)
        return table[positions // self.block_size] * self.block_size + positions % self.block_size

    def usage(self) -> dict[str, int]:
        """Tokens held, and the bytes they need against the bytes allocated and reserved for them (promised blocks;
        on demand, nothing beyond the allocated ones)."""
        tokens = sum(self.lengths.values())
        allocated = sum(len(t) for t in self.tables.values()) * self.block_size
        if self.admission == "reserve":
            promised = sum(self.promised.values()) * self.block_size
        else:
            promised = allocated
        per = self.bytes_per_token
        return dict(sequences=len(self.tables), tokens=tokens, token_bytes=tokens * per,
                    allocated_bytes=allocated * per, promised_bytes=promised * per)  # fmt: skip

    @torch.no_grad()
    def forward(self, model: TinyGPT, seqs: Sequence[int], tokens: torch.Tensor) -> torch.Tensor:
        """Append ``tokens`` (B, T) to sequences ``seqs`` through the model's own layers; return logits (B, T, vocab).

        Each sequence attends to its own cached keys and values (found through its block table) and, causally, to
        the new ones.
        """
        B, T = tokens.shape
        dev = tokens.device
        starts = torch.tensor([self.lengths[s] for s in seqs], device=dev)
        positions = starts[:, None] + torch.arange(T, device=dev)  # (B, T)
        for s in seqs:
            self._grow(s, self.lengths[s] + T)
        new_slots = torch.stack([self._slots(s, positions[i]) for i, s in enumerate(seqs)])  # (B, T)
        longest = int(starts.max()) + T
        key_pos = torch.arange(longest, device=dev)
        key_slots = torch.stack([self._slots(s, key_pos.clamp(max=self.lengths[s] + T - 1)) for s in seqs])
        mask = (key_pos[None, None, :] <= positions[:, :, None])[:, None]  # (B, 1, T, keys): causal and own length
        x = model.tok(tokens) + model.pos(positions)
        C = x.shape[-1]
        for layer, block in enumerate(model.layers()):
            q, k, v = block.qkv(block.ln1(x)).split(C, dim=2)
            shape = (B, T, self.n_heads, self.head_dim)
            self.k[layer][new_slots] = k.reshape(shape)
            self.v[layer][new_slots] = v.reshape(shape)
            keys = self.k[layer][key_slots].transpose(1, 2)  # (B, heads, keys, head_dim)
            values = self.v[layer][key_slots].transpose(1, 2)
            y = F.scaled_dot_product_attention(q.reshape(shape).transpose(1, 2), keys, values, attn_mask=mask)
            x = x + block.proj(y.transpose(1, 2).reshape(B, T, C))
            x = x + block.mlp(block.ln2(x))
        for i, s in enumerate(seqs):
            self.lengths[s] += T
            if self.prefix_caching:
                self._file(s, tokens[i].tolist())
        return model.lm_head(model.ln_f(x))
