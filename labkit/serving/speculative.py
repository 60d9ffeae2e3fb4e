"""Speculative decoding: a draft model proposes k tokens, the target checks them in one pass.

Taught in notebook `serving_llms`. :func:`speculative_generate` runs it with greedy acceptance (Leviathan et al.,
ICML 2023), so the output is exactly the target's; :func:`expected_tokens_per_pass` is their formula for the tokens
one target pass yields at acceptance rate α; :func:`layer_skip_draft` makes a draft from the target's first layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.result import Result
from ..workloads.models import TinyGPT


def layer_skip_draft(target: TinyGPT, n_layers: int) -> TinyGPT:
    """A draft model made of the target's first ``n_layers`` blocks, its embeddings and output head (shared, not
    copied): a cheaper model that often agrees with the target. Taught in notebook `serving_llms`."""
    if not 1 <= n_layers < len(target.blocks):
        raise ValueError(f"n_layers must be between 1 and {len(target.blocks) - 1}, got {n_layers}")
    draft = TinyGPT.__new__(TinyGPT)
    torch.nn.Module.__init__(draft)
    draft.max_len, draft.tok, draft.pos = target.max_len, target.tok, target.pos
    draft.blocks = torch.nn.ModuleList(target.blocks[:n_layers])
    draft.ln_f, draft.lm_head = target.ln_f, target.lm_head
    return draft.eval()


@dataclass
class SpeculativeResult(Result):
    """Speculative decoding's output and its bookkeeping (notebook `serving_llms`)."""

    tokens: torch.Tensor  # (1, prompt + new_tokens)
    prompt_len: int
    k: int
    target_passes: int
    draft_passes: int
    accepted: int
    rejected: int

    @property
    def acceptance(self) -> float:
        """Per-token acceptance rate α: accepted over examined draft tokens (each pass stops at the first miss)."""
        return self.accepted / max(1, self.accepted + self.rejected)

    @property
    def tokens_per_pass(self) -> float:
        return (self.tokens.shape[1] - self.prompt_len) / self.target_passes


def _truncate(caches: list[dict], length: int) -> None:
    for c in caches:
        c["k"], c["v"] = c["k"][:, :, :length], c["v"][:, :, :length]


@torch.no_grad()
def speculative_generate(target: TinyGPT, draft: TinyGPT, prompt: torch.Tensor, new_tokens: int, k: int):
    """Greedy speculative decoding: ``draft`` proposes ``k`` tokens, ``target`` checks them in one pass.

    Taught in notebook `serving_llms`. The target keeps the draft's tokens up to its first disagreement and adds its own
    token there (or one more after all ``k``), so the output is exactly the target's greedy output.
    """
    if prompt.ndim != 2 or prompt.shape[0] != 1 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be one non-empty sequence of shape (1, T), got {tuple(prompt.shape)}")
    if not isinstance(k, int) or k < 1 or not isinstance(new_tokens, int) or new_tokens < 1:
        raise ValueError(f"k and new_tokens must be positive integers, got {k!r}, {new_tokens!r}")
    if prompt.shape[1] + new_tokens + k > target.max_len:
        raise ValueError(
            f"prompt + new_tokens + k = {prompt.shape[1] + new_tokens + k} exceeds max_len {target.max_len}"
        )
    t_caches: list[dict] = [{} for _ in target.blocks]
    d_caches: list[dict] = [{} for _ in draft.blocks]
    seq = prompt
    nxt = target(seq, t_caches)[:, -1].argmax(-1, keepdim=True)  # prefill: the first token is the target's
    seq = torch.cat([seq, nxt], dim=1)
    passes, draft_passes, accepted, rejected = 1, 0, 0, 0
    d_len = 0
    while seq.shape[1] - prompt.shape[1] < new_tokens:
        # the draft catches up on the tokens it has not seen, then proposes k, one at a time
        guesses = []
        feed = seq[:, d_len:]
        for _ in range(k):
            guess = draft(feed, d_caches)[:, -1].argmax(-1, keepdim=True)
            draft_passes += 1
            guesses.append(guess)
            feed = guess
        d_len = seq.shape[1] + k - 1
        proposal = torch.cat(guesses, dim=1)  # (1, k)
        # one target pass over the last accepted token and the k proposals
        logits = target(torch.cat([seq[:, -1:], proposal], dim=1), t_caches)
        passes += 1
        choice = logits[0].argmax(-1)  # (k + 1,): the target's token after each position
        agree = (proposal[0] == choice[:k]).int()
        n = int(agree.cumprod(0).sum())  # proposals kept: up to the first disagreement
        accepted += n
        rejected += int(n < k)
        seq = torch.cat([seq, proposal[:, :n], choice[n].view(1, 1)], dim=1)
        _truncate(t_caches, seq.shape[1] - 1)  # the target has seen every token but the newest
        d_len = min(d_len, seq.shape[1] - 1)
        _truncate(d_caches, d_len)
    seq = seq[:, : prompt.shape[1] + new_tokens]
    return SpeculativeResult(seq, prompt.shape[1], k, passes, draft_passes, accepted, rejected)


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """Leviathan et al. (2023), eq. 1: tokens per target pass, (1 − α^(k+1)) / (1 − α), for acceptance rate α.

    Taught in notebook `serving_llms`.
    """
    if not 0 <= alpha <= 1 or not isinstance(k, int) or k < 1:
        raise ValueError(f"alpha must lie in [0, 1] and k be a positive integer; got {alpha}, {k!r}")
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
