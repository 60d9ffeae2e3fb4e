"""Models in sized families, built locally with random weights (nothing is downloaded).

Taught in notebook `inference_vs_training` (the MLP), notebook `model_size` (families of sizes, torchvision architectures) and
notebook `latency_throughput` (the small GPT's KV cache).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core import checks
from ..instruments.memory import ensure_fits


class MLP(nn.Module):
    """``depth`` hidden layers of width ``hidden`` with ReLU, then a linear head.

    Taught in notebook `inference_vs_training`.

    ``backbone`` and ``head`` are separate so fine-tuning can freeze one and train the other.
    """

    def __init__(self, d_in: int, hidden: int, depth: int, num_classes: int):
        super().__init__()
        for name, value in dict(d_in=d_in, hidden=hidden, depth=depth, num_classes=num_classes).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"MLP {name} must be a positive integer, got {value!r}")
        layers: list[nn.Module] = []
        width = d_in
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Linear(width, num_classes)
        self.widths = [d_in] + [hidden] * depth + [num_classes]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, d_in) -> (B, num_classes)
        return self.head(self.backbone(x))


class SmallCNN(nn.Module):
    """A VGG-style CNN: ``stages`` of (conv3×3, ReLU, conv3×3, ReLU, max-pool), doubling channels."""

    def __init__(self, in_channels: int = 3, width: int = 32, stages: int = 3, num_classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = []
        c_in, c = in_channels, width
        for _ in range(stages):
            layers += [nn.Conv2d(c_in, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU()]
            layers.append(nn.MaxPool2d(2))
            c_in, c = c, c * 2
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W) -> (B, num_classes)
        return self.head(self.features(x).mean(dim=(2, 3)))


class AudioEncoder(nn.Module):
    """A 1-D convolutional encoder over raw audio, shaped like wav2vec 2.0's feature encoder but narrow.

    Strided convolutions turn 16 kHz samples into about 50 frames per second (notebook `input_size`).
    """

    def __init__(self, channels: int = 64, num_classes: int = 10):
        super().__init__()
        specs = [(10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)]  # (kernel, stride): 320x downsampling
        layers: list[nn.Module] = []
        c_in = 1
        for kernel, stride in specs:
            layers += [nn.Conv1d(c_in, channels, kernel, stride), nn.GELU()]
            c_in = channels
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:  # (B, 1, samples) -> (B, frames, num_classes)
        return self.head(self.features(audio).transpose(1, 2))


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then a 4× MLP."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        # With a cache, the T new queries attend to all earlier keys: causal only within the new ones.
        causal = T > 1
        if causal and k.shape[2] != T:
            past = k.shape[2] - T
            mask = torch.ones(T, k.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=past)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A small GPT-style decoder with an optional KV cache for generation. Taught in notebook `model_size`."""

    def __init__(self, vocab: int = 256, d_model: int = 128, n_layers: int = 2, n_heads: int = 4, max_len: int = 256):
        super().__init__()
        self.max_len = max_len
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx: torch.Tensor, caches: list[dict] | None = None) -> torch.Tensor:  # (B, T) -> (B, T, vocab)
        B, T = idx.shape
        start = caches[0]["k"].shape[2] if caches and "k" in caches[0] else 0
        if start + T > self.max_len:
            raise ValueError(f"sequence of {start + T} tokens exceeds max_len={self.max_len}")
        pos = torch.arange(start, start + T, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches is not None else None)
        return self.lm_head(self.ln_f(x))

    def layers(self) -> list[Block]:
        """The transformer blocks, as :class:`Block` (to a type checker a ModuleList holds plain Modules)."""
        return [block for block in self.blocks if isinstance(block, Block)]

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, new_tokens: int, use_cache: bool = True) -> torch.Tensor:
        """Greedy decoding; with the cache each step feeds only the newest token."""
        caches: list[dict] | None = [{} for _ in self.blocks] if use_cache else None
        logits = self(idx, caches)
        for _ in range(new_tokens):
            nxt = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            idx = torch.cat([idx, nxt], dim=1)
            logits = self(nxt, caches) if use_cache else self(idx)
        return idx


# Sized families: name -> constructor arguments.
MLP_SIZES = {
    "xs": dict(d_in=256, hidden=256, depth=2, num_classes=10),
    "s": dict(d_in=256, hidden=1024, depth=3, num_classes=10),
    "m": dict(d_in=512, hidden=2048, depth=4, num_classes=10),
    "l": dict(d_in=1024, hidden=4096, depth=6, num_classes=10),
}
CNN_SIZES = {
    "xs": dict(width=16, stages=2),
    "s": dict(width=32, stages=3),
    "m": dict(width=64, stages=4),
    "l": dict(width=128, stages=4),
}
GPT_SIZES = {
    "xs": dict(d_model=64, n_layers=2, n_heads=2),
    "s": dict(d_model=128, n_layers=4, n_heads=4),
    "m": dict(d_model=256, n_layers=6, n_heads=8),
    "l": dict(d_model=512, n_layers=8, n_heads=8),
}
FAMILIES = {"mlp": (MLP, MLP_SIZES), "cnn": (SmallCNN, CNN_SIZES), "gpt": (TinyGPT, GPT_SIZES)}

TORCHVISION_MODELS = ("resnet18", "resnet34", "resnet50", "mobilenet_v3_small", "mobilenet_v3_large", "vit_b_16")


def build_model(family: str, size: str = "s", device: torch.device | str = "cpu", **overrides) -> nn.Module:
    """A model of ``family`` ("mlp", "cnn", "gpt") at ``size`` ("xs", "s", "m", "l"), on ``device``.

    Taught in notebook `input_size`.

    The model is first built on the ``meta`` device (no memory) to count its weights, and a
    :class:`~labkit.instruments.memory.DoesNotFitError` is raised before allocating if they cannot fit.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; allowed: {', '.join(FAMILIES)}")
    cls, sizes = FAMILIES[family]
    if size not in sizes:
        raise ValueError(f"unknown size {size!r} for {family}; allowed: {', '.join(sizes)}")
    kwargs = {**sizes[size], **overrides}
    with torch.device("meta"):
        weight_bytes = sum(p.nbytes for p in cls(**kwargs).parameters())
    ensure_fits(weight_bytes, device, what=f"{family}-{size} weights")
    with torch.device(device):
        return cls(**kwargs)


def torchvision_model(name: str, num_classes: int = 1000, device: torch.device | str = "cpu") -> nn.Module:
    """A torchvision architecture with random weights (``weights=None``: nothing is downloaded).

    Taught in notebook `start_here`.
    """
    import torchvision

    available = set(torchvision.models.list_models(module=torchvision.models))
    if name not in available:
        raise ValueError(f"unknown torchvision model {name!r}; suggested: {', '.join(TORCHVISION_MODELS)}")
    checks.whole("num_classes", num_classes)
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes).to(device)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters (elements, not bytes); shared tensors counted once. Taught in notebook `inference_vs_training`."""
    checks.module("model", model)
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) in seen or (trainable_only and not p.requires_grad):
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def _check_widths(widths, batch) -> None:
    if not isinstance(widths, (list, tuple)) or len(widths) < 2:
        raise ValueError(f"widths must list two or more layer widths [d_in, ..., out], got {widths!r}")
    for i, w in enumerate(widths):
        checks.whole(f"widths[{i}]", w)
    checks.whole("batch", batch)


def mlp_forward_flops(widths: list[int], batch: int) -> int:
    """Forward FLOPs of an MLP with layer widths ``[d_in, h, ..., num_classes]``: Σ 2·B·in·out.

    Taught in notebook `inference_vs_training`.
    """
    _check_widths(widths, batch)
    return sum(2 * batch * a * b for a, b in zip(widths[:-1], widths[1:], strict=True))


def mlp_training_flops(widths: list[int], batch: int) -> int:
    """FLOPs of forward + backward for an MLP trained end to end (notebook `inference_vs_training`).

    Backward does two matmuls per layer (gradient w.r.t. the weights and w.r.t. the layer's
    input), each the size of the forward one, except the first layer: nothing needs the gradient
    of the input batch. So: 3 × forward − 2·B·d_in·h₁.
    """
    return 3 * mlp_forward_flops(widths, batch) - 2 * batch * widths[0] * widths[1]


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update: y = W·x + (alpha / rank) · B·(A·x).

    What :func:`add_lora` puts in place of each linear layer (notebook `inference_vs_training`). Low-rank adaptation (Hu et al., 2021, *LoRA*): only A (rank × in) and B (out × rank) are
    trained, rank·(in + out) parameters instead of in·out. B starts at zero, so the adapted model starts out
    exactly as the original; A starts like an ``nn.Linear`` weight (the paper uses a random Gaussian).
    Hand-written because the library that usually provides it (``peft``) is not part of this course's stack.
    """

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0):
        super().__init__()
        if not isinstance(rank, int) or rank < 1:
            raise ValueError(f"rank must be a positive integer, got {rank!r}")
        checks.number("alpha", alpha)
        self.base = base.requires_grad_(False)
        self.A = nn.Parameter(torch.empty(rank, base.in_features, device=base.weight.device))
        self.B = nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device))
        nn.init.kaiming_uniform_(self.A, a=5**0.5)
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.A.T) @ self.B.T * self.scale


def add_lora(model: nn.Module, rank: int = 8, alpha: float = 16.0) -> nn.Module:
    """Freeze ``model`` and wrap every ``nn.Linear`` in it in a :class:`LoRALinear`, in place; returns ``model``.

    Taught in notebook `inference_vs_training`.
    """
    checks.module("model", model)
    model.requires_grad_(False)
    for name, child in list(model.named_children()):
        if isinstance(child, nn.Linear):
            setattr(model, name, LoRALinear(child, rank, alpha))
        else:
            add_lora(child, rank, alpha)
    return model


def lora_training_flops(widths: list[int], batch: int, rank: int) -> int:
    """FLOPs of forward + backward for an MLP with LoRA on every layer (notebook `inference_vs_training`). Per layer (in → out):

    forward 2B·(in·out + rank·in + rank·out); backward the gradients of B and of A·x (2B·out·rank each) and of A
    (2B·rank·in), and, except in the first layer, the input's gradient through W and through A
    (2B·out·in + 2B·rank·in). No gradient of the frozen W itself: that is the saving.
    """
    _check_widths(widths, batch)
    checks.whole("rank", rank)
    total = 0
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        total += 2 * batch * (a * b + rank * a + rank * b)  # forward
        total += 2 * batch * (2 * b * rank + rank * a)  # backward: dB, d(A·x), dA
        if i > 0:
            total += 2 * batch * (b * a + rank * a)  # backward: the input's gradient, through W and through A
    return total
