"""Image and video generation: a diffusion transformer, its sampler and a latent decoder, built locally.

Taught in notebook `generating_images`.

- :class:`DiT` is the Diffusion Transformer of Peebles & Xie, "Scalable Diffusion Models with Transformers"
  (ICCV 2023): patchify a latent, transformer blocks conditioned by adaLN-Zero on the timestep and a class
  label (with one extra "null" label for classifier-free guidance), un-patchify. Built with the paper's
  XL/2 sizes (:data:`DIT_XL_2`) it has the paper's 675 M parameters, and its counted FLOPs are twice the
  paper's "Gflops" (118.6 at 256×256, 524.6 at 512×512): the paper counts multiply-adds. Given a video latent
  (B, C, F, H, W) it attends over all F·H·W/p² patches at once, the full spatio-temporal attention of video
  diffusion transformers (e.g. CogVideoX, Wan).
- :func:`pass_flops` is the same count from first principles; the tests check the two agree exactly.
- :func:`ddim_timesteps` and :func:`ddim_step` are DDIM's deterministic sampler (Song et al., "Denoising
  Diffusion Implicit Models", ICLR 2021) on DDPM's linear noise schedule (Ho et al., 2020), the schedule DiT
  trains on; the tests check them against ``diffusers.DDIMScheduler``. Written here rather than imported:
  the update is four lines a learner should see, and importing ``diffusers`` costs seconds of a notebook's
  budget on two cores.
- :class:`LatentDecoder` is a convolutional decoder shaped like Stable Diffusion's VAE decoder (ResNet blocks,
  three 2× upsamplings: 8× the latent's side), far narrower.

Weights are random: the lesson is the time and memory of generating, which do not depend on what the
weights have learned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core import checks

TRAIN_STEPS = 1000  # DDPM's T (Ho et al., 2020), which DiT keeps
FREQ_DIM = 256  # the timestep's sinusoidal embedding width in DiT


@dataclass(frozen=True)
class DiTConfig:
    """A DiT's sizes: width, depth, heads, patch side, latent channels, classes, and the MLP's ratio.

    Taught in notebook `generating_images`. A size that is not a positive integer is an error that names it.
    """

    width: int = 128
    depth: int = 2
    heads: int = 4
    patch: int = 2
    channels: int = 4  # the latent's channels (Stable Diffusion's VAE: 4)
    classes: int = 1000
    mlp_ratio: int = 4
    learn_sigma: bool = True  # DiT predicts the noise and its variance: twice the channels out

    def __post_init__(self) -> None:
        for name in ("width", "depth", "heads", "patch", "channels", "classes", "mlp_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"DiTConfig.{name} must be a positive integer, got {value!r}")
        if self.width % self.heads:
            raise ValueError(f"DiTConfig.width ({self.width}) must be a multiple of heads ({self.heads})")

    @property
    def out_channels(self) -> int:
        return 2 * self.channels if self.learn_sigma else self.channels


# Peebles & Xie (2023), Table 1: DiT-XL has 28 layers, hidden size 1152, 16 heads; "/2" is the patch side.
DIT_XL_2 = DiTConfig(width=1152, depth=28, heads=16, patch=2)


def latent_tokens(side: int, patch: int, frames: int = 1) -> int:
    """How many tokens a DiT sees for a ``side``×``side`` latent over ``frames`` frames: frames · (side/patch)².

    Taught in notebook `generating_images`.
    """
    if not isinstance(side, int) or side < 1 or side % patch:
        raise ValueError(f"a latent side must be a positive multiple of the patch side {patch}, got {side!r}")
    if not isinstance(frames, int) or frames < 1:
        raise ValueError(f"frames must be a positive integer, got {frames!r}")
    return frames * (side // patch) ** 2


def latent_side(pixels: int, factor: int = 8) -> int:
    """The latent's side for an image ``pixels`` wide: pixels / factor (Stable Diffusion's VAE: 8).

    Taught in notebook `generating_images`. A side the factor does not divide is an error that says so.
    """
    checks.whole("factor", factor)
    if not isinstance(pixels, int) or pixels < 1 or pixels % factor:
        raise ValueError(
            f"an image side must be a positive multiple of the autoencoder's factor {factor} (it maps {factor} "
            f"pixels to one latent cell), got {pixels!r}"
        )
    return pixels // factor


def pass_flops(cfg: DiTConfig, side: int, frames: int = 1, batch: int = 1) -> dict[str, int]:
    """FLOPs (2 per multiply-add) of one DiT forward pass, by part, from the layer shapes.

    Taught in notebook `generating_images`.

    ``linear`` (every matrix multiply applied to each token: QKV, attention output, MLP, patchify and the final
    projection) grows with the tokens N; ``attention`` (Q·Kᵀ and the weighted sum of V, 2·N²·width each per
    layer) grows with N²; ``conditioning`` (timestep MLP and adaLN, once per sample) does not grow at all.
    """
    n = latent_tokens(side, cfg.patch, frames)
    d, p2 = cfg.width, cfg.patch**2
    per_token = cfg.depth * (3 * d * d + d * d + 2 * cfg.mlp_ratio * d * d) + p2 * cfg.channels * d
    per_token += d * p2 * cfg.out_channels
    per_sample = FREQ_DIM * d + d * d + cfg.depth * d * 6 * d + d * 2 * d
    return {
        "linear": 2 * batch * n * per_token,
        "attention": 2 * batch * cfg.depth * 2 * n * n * d,
        "conditioning": 2 * batch * per_sample,
    }


def _sincos(positions: torch.Tensor, dim: int) -> torch.Tensor:  # (n,) -> (n, dim)
    omega = 1.0 / 10_000 ** (torch.arange(dim // 2, dtype=torch.float64) / (dim // 2))
    angles = positions.to(torch.float64)[:, None] * omega[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).float()


@lru_cache(maxsize=32)
def position_embedding(dim: int, frames: int, h: int, w: int, device: str = "cpu") -> torch.Tensor:
    """Fixed sine-cosine positions (frames·h·w, dim), not learned, as in DiT: half the width for rows, half for
    columns, plus a sine-cosine over frames for a video. Computed once per shape and device (DiT keeps them in a
    buffer), so a pass copies nothing to the device."""
    return _position_embedding(dim, frames, h, w).to(device)


def _position_embedding(dim: int, frames: int, h: int, w: int) -> torch.Tensor:
    rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    spatial = torch.cat([_sincos(rows.flatten(), dim // 2), _sincos(cols.flatten(), dim // 2)], dim=1)
    if frames == 1:
        return spatial
    return (spatial[None] + _sincos(torch.arange(frames), dim)[:, None]).reshape(frames * h * w, dim)


def timestep_embedding(t: torch.Tensor, dim: int = FREQ_DIM) -> torch.Tensor:  # (B,) -> (B, dim)
    """The timestep as ``dim`` sines and cosines of geometrically spaced frequencies (DiT's, from ADM)."""
    if checks.whole("dim", dim, minimum=2) % 2:
        raise ValueError(f"dim must be even (half sines, half cosines), got {dim}")
    half = dim // 2
    freqs = torch.exp(-math.log(10_000) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    angles = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=1)


class DiTBlock(nn.Module):
    """Self-attention and an MLP, each scaled, shifted and gated by the conditioning (adaLN-Zero)."""

    def __init__(self, cfg: DiTConfig):
        super().__init__()
        d = cfg.width
        self.heads = cfg.heads
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.fc1 = nn.Linear(d, cfg.mlp_ratio * d)
        self.fc2 = nn.Linear(cfg.mlp_ratio * d, d)
        self.modulation = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:  # x (B, N, d), c (B, d)
        shift1, scale1, gate1, shift2, scale2, gate2 = self.modulation(c)[:, None].chunk(6, dim=-1)
        b, n, d = x.shape
        h = self.norm1(x) * (1 + scale1) + shift1
        q, k, v = self.qkv(h).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)  # (B, heads, N, hd)
        attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
        x = x + gate1 * self.proj(attended)
        h = self.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


class DiT(nn.Module):
    """A diffusion transformer over an image latent (B, C, H, W) or a video latent (B, C, F, H, W).

    Taught in notebook `generating_images`.

    ``forward(x, t, y)`` takes the noisy latent, the timestep (B,) and the class label (B,), label
    ``cfg.classes`` being the null label of classifier-free guidance; it returns (B, out_channels, ...) of the
    latent's shape: the predicted noise, then (``learn_sigma``) the variance's interpolation.
    """

    def __init__(self, cfg: DiTConfig = DiTConfig()):
        super().__init__()
        self.cfg = cfg
        d = cfg.width
        self.patchify = nn.Conv2d(cfg.channels, d, kernel_size=cfg.patch, stride=cfg.patch)
        self.t_embed = nn.Sequential(nn.Linear(FREQ_DIM, d), nn.SiLU(), nn.Linear(d, d))
        self.y_embed = nn.Embedding(cfg.classes + 1, d)  # + the null label
        self.blocks = nn.ModuleList(DiTBlock(cfg) for _ in range(cfg.depth))
        self.norm_out = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.modulation_out = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d))
        self.head = nn.Linear(d, cfg.patch**2 * cfg.out_channels)

    @property
    def null_label(self) -> int:
        return self.cfg.classes

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        cfg, p = self.cfg, self.cfg.patch
        video = x.dim() == 5
        if not video and x.dim() != 4:
            raise ValueError(f"DiT takes a latent (B, C, H, W) or (B, C, F, H, W), got shape {tuple(x.shape)}")
        frames_in = x if video else x[:, :, None]  # (B, C, F, H, W)
        b, c, f, hh, ww = frames_in.shape
        if c != cfg.channels or hh % p or ww % p:
            raise ValueError(
                f"DiT expects {cfg.channels} latent channels and sides that are multiples of the patch side {p}, "
                f"got shape {tuple(x.shape)}"
            )
        frames = frames_in.transpose(1, 2).reshape(b * f, c, hh, ww)
        tokens = self.patchify(frames).flatten(2).transpose(1, 2)  # (B·F, h·w, d)
        h, w = hh // p, ww // p
        tokens = tokens.reshape(b, f * h * w, cfg.width)  # (B, N, d): every frame's patches in one sequence
        tokens = tokens + position_embedding(cfg.width, f, h, w, str(tokens.device)).to(tokens.dtype)
        cond = self.t_embed(timestep_embedding(t).to(tokens)) + self.y_embed(y)  # (B, d)
        for block in self.blocks:
            tokens = block(tokens, cond)
        shift, scale = self.modulation_out(cond)[:, None].chunk(2, dim=-1)
        out = self.head(self.norm_out(tokens) * (1 + scale) + shift)  # (B, N, p·p·out)
        out = out.view(b, f, h, w, p, p, cfg.out_channels).permute(0, 6, 1, 2, 4, 3, 5)
        out = out.reshape(b, cfg.out_channels, f, hh, ww)
        return out if video else out[:, :, 0]


def alphas_cumprod(train_steps: int = TRAIN_STEPS) -> torch.Tensor:
    """ᾱ_t for DDPM's linear schedule, β from 1e-4 to 0.02 over ``train_steps`` (Ho et al., 2020)."""
    checks.whole("train_steps", train_steps)
    betas = torch.linspace(1e-4, 0.02, train_steps, dtype=torch.float64)
    return torch.cumprod(1 - betas, dim=0)


def ddim_timesteps(steps: int, train_steps: int = TRAIN_STEPS) -> list[int]:
    """The ``steps`` timesteps a DDIM sampler visits, noisiest first, evenly spaced ("leading" spacing).

    Taught in notebook `generating_images`. ``steps`` must be an integer from 1 to ``train_steps``.
    """
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= train_steps:
        raise ValueError(f"steps must be an integer from 1 to {train_steps} (the training schedule's), got {steps!r}")
    stride = train_steps // steps
    return [i * stride for i in reversed(range(steps))]


def ddim_step(
    x: torch.Tensor, eps: torch.Tensor, t: int, steps: int, schedule: torch.Tensor | None = None
) -> torch.Tensor:
    """One deterministic DDIM update (η = 0) from timestep ``t`` to the next one of a ``steps``-step schedule.

    Taught in notebook `generating_images`.

    The clean latent implied by the predicted noise, x̂₀ = (x − √(1−ᾱ_t)·ε) / √ᾱ_t, is moved to the previous
    timestep's noise level: √ᾱ_prev·x̂₀ + √(1−ᾱ_prev)·ε (ᾱ_prev = 1 after the last step).
    """
    schedule = alphas_cumprod() if schedule is None else schedule
    prev = t - len(schedule) // steps
    a_t = float(schedule[t])
    a_prev = float(schedule[prev]) if prev >= 0 else 1.0
    x0 = (x - math.sqrt(1 - a_t) * eps) / math.sqrt(a_t)
    return math.sqrt(a_prev) * x0 + math.sqrt(1 - a_prev) * eps


class _ResBlock(nn.Module):
    """GroupNorm, SiLU, 3×3 convolution, twice, around a skip connection."""

    def __init__(self, channels_in: int, channels_out: int, groups: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels_in)
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, padding=1)
        self.skip = nn.Conv2d(channels_in, channels_out, 1) if channels_in != channels_out else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        return self.skip(x) + self.conv2(F.silu(self.norm2(h)))


class LatentDecoder(nn.Module):
    """Latent (B, 4, h, w) → image (B, 3, 8h, 8w): a narrow decoder shaped like Stable Diffusion's VAE decoder.

    Taught in notebook `generating_images`.

    ``widths`` are the channels from the latent side outwards (Stable Diffusion's: 512, 512, 256, 128); each
    step from one width to the next is a ResNet block, a 2× nearest-neighbour upsampling and a convolution.
    """

    def __init__(self, widths: tuple[int, ...] = (64, 64, 32, 32), channels: int = 4, groups: int = 8):
        super().__init__()
        if len(widths) < 2 or any(not isinstance(c, int) or c < 1 or c % groups for c in widths):
            raise ValueError(f"widths must be two or more multiples of groups={groups}, got {widths!r}")
        layers: list[nn.Module] = [
            nn.Conv2d(channels, widths[0], 3, padding=1),
            _ResBlock(widths[0], widths[0], groups),
        ]
        for c_in, c_out in zip(widths, widths[1:], strict=False):  # each stage doubles the side
            layers += [_ResBlock(c_in, c_out, groups), nn.Upsample(scale_factor=2, mode="nearest")]
            layers += [nn.Conv2d(c_out, c_out, 3, padding=1)]
        layers += [nn.GroupNorm(groups, widths[-1]), nn.SiLU(), nn.Conv2d(widths[-1], 3, 3, padding=1)]
        self.net = nn.Sequential(*layers)
        self.factor = 2 ** (len(widths) - 1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)
