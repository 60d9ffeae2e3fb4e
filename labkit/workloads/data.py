"""Synthetic data that a model can actually learn, generated locally (no downloads).

Taught in notebook `inference_vs_training` (a real short training run); later notebooks reuse the images and tokens.
"""

from __future__ import annotations

import math

import torch
from torch.utils.data import TensorDataset

from ..core import checks


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def teacher_classification(n: int, d_in: int, classes: int, seed: int = 0, teacher_hidden: int = 64) -> TensorDataset:
    """Gaussian inputs labelled by a fixed random two-layer "teacher" network.

    Taught in notebook `inference_vs_training`.

    The labels are a deterministic function of the inputs, so a student MLP can drive its loss
    well below chance (ln ``classes``); how fast it does is the lesson, not whether.
    """
    for name, value in dict(n=n, d_in=d_in, teacher_hidden=teacher_hidden).items():
        checks.whole(name, value)
    if n < 1 or d_in < 1 or classes < 2:
        raise ValueError(f"need n >= 1, d_in >= 1 and classes >= 2; got n={n}, d_in={d_in}, classes={classes}")
    g = _generator(seed)
    x = torch.randn(n, d_in, generator=g)  # (n, d_in)
    w1 = torch.randn(d_in, teacher_hidden, generator=g) / math.sqrt(d_in)
    w2 = torch.randn(teacher_hidden, classes, generator=g) / math.sqrt(teacher_hidden)
    y = (torch.tanh(x @ w1) @ w2).argmax(dim=1)  # (n,)
    return TensorDataset(x, y)


def grating_images(n: int, size: int = 32, classes: int = 4, seed: int = 0, noise: float = 0.5) -> TensorDataset:
    """RGB images of sinusoidal gratings whose orientation is the class, plus noise.

    Shaped like a real image batch (n, 3, size, size), learnable by a small CNN.
    """
    if size < 4 or classes < 2:
        raise ValueError(f"need size >= 4 and classes >= 2; got size={size}, classes={classes}")
    checks.whole("n", n)
    checks.amount("noise", noise)
    g = _generator(seed)
    y = torch.randint(classes, (n,), generator=g)
    angle = y.float() * math.pi / classes  # (n,)
    phase = torch.rand(n, generator=g) * 2 * math.pi
    freq = 2 * math.pi * 3 / size
    coords = torch.arange(size, dtype=torch.float32)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")  # (size, size)
    along = xx * torch.cos(angle)[:, None, None] + yy * torch.sin(angle)[:, None, None]  # (n, size, size)
    base = torch.sin(freq * along + phase[:, None, None])
    colour = torch.rand(n, 3, 1, 1, generator=g) * 0.5 + 0.5
    x = base[:, None] * colour + noise * torch.randn(n, 3, size, size, generator=g)
    return TensorDataset(x, y)


def counting_tokens(n: int, seq_len: int, vocab: int = 256, seed: int = 0) -> torch.Tensor:
    """Token sequences (n, seq_len) that count up by a per-sequence step: x[t+1] = x[t] + s mod vocab.

    Taught in notebook `latency_throughput`.

    After two tokens the rest is predictable, so a small GPT learns it within a few hundred steps.
    """
    if seq_len < 2 or vocab < 4:
        raise ValueError(f"need seq_len >= 2 and vocab >= 4; got seq_len={seq_len}, vocab={vocab}")
    checks.whole("n", n)
    g = _generator(seed)
    start = torch.randint(vocab, (n, 1), generator=g)
    step = torch.randint(1, 4, (n, 1), generator=g)
    return (start + step * torch.arange(seq_len)) % vocab


def meeting_audio(seconds: float, sample_rate: int = 16_000, seed: int = 0) -> torch.Tensor:
    """A speech-like mono signal (1, samples): voiced harmonics with a syllable-rate envelope, plus noise.

    Generated, not recorded: it has the length and sample rate of a real meeting recording, which
    is all that decides the time a model takes over it (notebook `input_size`).
    """
    checks.positive("seconds", seconds)
    checks.whole("sample_rate", sample_rate)
    if seconds <= 0 or sample_rate <= 0:
        raise ValueError(f"seconds and sample_rate must be positive; got {seconds} and {sample_rate}")
    n = int(seconds * sample_rate)
    g = _generator(seed)
    t = torch.arange(n, dtype=torch.float32) / sample_rate
    pitch = 120.0 + 30.0 * torch.sin(2 * math.pi * 0.3 * t)  # a slowly gliding voice, in Hz
    phase = 2 * math.pi * torch.cumsum(pitch, 0) / sample_rate
    voice = sum(torch.sin(k * phase) / k for k in range(1, 6))
    syllables = 0.5 * (1 + torch.sin(2 * math.pi * 4.0 * t))  # about four syllables a second
    signal = 0.3 * voice * syllables + 0.02 * torch.randn(n, generator=g)
    return signal.unsqueeze(0)


def jpeg_gratings(
    n: int, size: int = 96, classes: int = 4, seed: int = 0, noise: float = 1.0, quality: int = 90
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``n`` grating images (see :func:`grating_images`) encoded as JPEG files in memory (notebook `optimisation`).

    Returns the encoded files (1-D uint8 tensors, as read from disk) and the labels. Decoding them
    costs real CPU time, as it does for a photo dataset.
    """
    from torchvision.io import encode_jpeg

    if not 1 <= quality <= 100:
        raise ValueError(f"quality must be between 1 and 100, got {quality}")
    images, labels = grating_images(n, size=size, classes=classes, seed=seed, noise=noise).tensors
    files = []
    for chunk in images.split(256):  # (≤256, 3, size, size) floats → uint8 → JPEG, a chunk at a time
        files += encode_jpeg(list(((chunk.clamp(-2, 2) + 2) * (255 / 4)).round().to(torch.uint8)), quality=quality)
    return files, labels


class JpegDataset(torch.utils.data.Dataset):
    """Decode a JPEG, resize it, optionally flip it, normalise it: a typical image input pipeline.

    ``__getitem__`` returns ``(features, label)`` with the image flattened to ``3·out_size²``
    values, ready for an MLP (notebook `optimisation`).
    """

    def __init__(
        self, files: list[torch.Tensor], labels: torch.Tensor, out_size: int = 32, augment: bool = False,
        blur_sigma: float = 0.0,
    ):  # fmt: skip
        if len(files) != len(labels):
            raise ValueError(f"{len(files)} files but {len(labels)} labels")
        if blur_sigma < 0:
            raise ValueError(f"blur_sigma must be zero (no blur) or positive, got {blur_sigma}")
        self.files, self.labels, self.out_size, self.augment = files, labels, out_size, augment
        self.blur_sigma = blur_sigma  # a Gaussian blur at full resolution: a deliberately costly augmentation

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        from torchvision.io import decode_jpeg
        from torchvision.transforms.v2 import functional as TF

        image = decode_jpeg(self.files[i])  # (3, H, W) uint8
        if self.blur_sigma:
            size = 2 * round(3 * self.blur_sigma) + 1
            image = TF.gaussian_blur(image.float(), [size, size], [self.blur_sigma, self.blur_sigma])
        image = TF.resize(image, [self.out_size, self.out_size], antialias=True)
        if self.augment and torch.rand(()) < 0.5:
            image = image.flip(-1).flip(-2)  # a half turn keeps a grating's orientation (one flip would change it)
        return (image.float() / 255 - 0.5).div(0.25).flatten(), self.labels[i]
