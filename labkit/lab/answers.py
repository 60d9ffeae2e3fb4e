"""The answer key of every checked exercise, computed from the question's own numbers (the back of the book).

Each notebook's checker cell names its exercise and passes what the answer depends on from the notebook
(``labkit.check("inference_vs_training.3", answer_3, step_s=step_s, batch=B)``); the expected value is computed here, so it is not
printed in the cell beneath the question. ``make test`` runs every notebook with each exercise's
folded solution filled in after it (``tests/prepare_notebooks.py``), and checks that the solution is judged right
and that an obviously wrong answer is judged wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field


class NotYet(Exception):
    """The exercise cannot be checked yet (e.g. the capstone's card does not fit); the message says why."""


@dataclass(frozen=True)
class Answer:
    """One exercise's expected answer (a function of what the notebook passes), its hint, and what it needs."""

    expected: Callable[..., object]  # keyword arguments: what the notebook passes to labkit.check
    hint: str
    needs: tuple[str, ...] = field(default=())


def _count_bmm() -> int:
    import torch

    from ..instruments.flops import count_flops

    return count_flops(torch.bmm, torch.randn(8, 128, 64), torch.randn(8, 64, 32))


def _count_mlp_step() -> int:
    import torch
    import torch.nn.functional as F

    from ..instruments.flops import count_flops
    from ..workloads.models import MLP

    model, x, y = MLP(100, 200, 1, 10), torch.randn(32, 100), torch.randint(0, 10, (32,))
    return count_flops(lambda: F.cross_entropy(model(x), y).backward())


def _gpt_matmul_weights() -> int:
    import torch

    from ..workloads.models import TinyGPT

    with torch.device("meta"):
        gpt = TinyGPT(vocab=256, d_model=256, n_layers=6, n_heads=8)
    return sum(m.weight.numel() for m in gpt.modules() if isinstance(m, torch.nn.Linear))


def _state_gb(params: float, recipe: str, unit: float) -> float:
    from ..predict.memory_model import bytes_per_parameter

    return params * bytes_per_parameter(recipe).total / unit


def _checkpoint_gb(params: float, recipe: str) -> float:
    from ..predict.memory_model import checkpoint_bytes_per_parameter

    return params * checkpoint_bytes_per_parameter(recipe) / 1e9


def _zero_gb(params: float, stage: int, data: int) -> float:
    from ..predict.memory_model import ParallelLayout, sharded_state_bytes

    return sum(sharded_state_bytes(params, "mixed adam", ParallelLayout(data=data, zero=stage)).values()) / 1e9


def _intensity(flops: float, nbytes: float) -> float:
    from ..instruments.flops import arithmetic_intensity

    return arithmetic_intensity(flops, nbytes)


def _fits_7b(saved_per_token_layer: float) -> bool:
    from ..predict.memory_model import estimate_transformer_training, fits_on

    est = estimate_transformer_training(7_000_000_000, "mixed adam", batch=1, seq_len=4096, d_model=4096,
                                        n_layers=32, saved_per_token_layer=saved_per_token_layer)  # fmt: skip
    return fits_on(est["total"], 80)


def _smallest_static(workload, n_gpus: int) -> int:
    from ..predict.cluster import simulate_day

    return next(k for k in range(1, n_gpus) if simulate_day(workload, "static", inference_gpus=k).slo_violation == 0)


def _line_at(xs, ys, x) -> float:
    from ..predict.scaling import fit_linear

    line = fit_linear(xs, ys)
    return line.fixed + line.per_unit * x


def _capstone(card) -> float:
    if not card.fits:
        raise NotYet(
            "your card does not fit yet: change the batch, the recipe, the GPU, or the layout (data, tensor, pipeline, zero)"
        )
    return card.seconds / 3600


def _attention_overtakes() -> int:
    from ..workloads.diffusion import DIT_XL_2, pass_flops

    return next(
        s for s in range(2, 1024, 2) if pass_flops(DIT_XL_2, s)["attention"] > pass_flops(DIT_XL_2, s)["linear"]
    )


KEY: dict[str, Answer] = {
    "start_here.1": Answer(lambda: _count_bmm(), "each of the 8 products is 2·M·N·K"),
    "start_here.2": Answer(
        lambda: _intensity(1, 3 * 4), "one FLOP per element; each element moves 3 floats of 4 bytes"
    ),
    "start_here.3": Answer(
        lambda roof: roof.bound(_intensity(2 * 4096 * 4096, 4 * (4096 * 4096 + 2 * 4096))),
        "compare its intensity with the ridge point",
        ("roof",),
    ),  # fmt: skip
    "inference_vs_training.1": Answer(lambda: _count_mlp_step(), "3 x forward, minus the first layer's input gradient"),
    "inference_vs_training.2": Answer(
        lambda: _state_gb(7e9, "fp32 adam", 2**30), "16 bytes per parameter, in GiB (2**30 bytes)"
    ),
    "inference_vs_training.3": Answer(
        lambda step_s, batch: 10 * (1_000_000 // batch) * step_s / 3600,
        "epochs x steps per epoch x step time",
        ("step_s", "batch"),
    ),  # fmt: skip
    "fused_attention.1": Answer(lambda: 2 * 32 * 8192**2 * 2, "two T x T tensors per head, 2 bytes each"),
    "fused_attention.2": Answer(lambda: 4 * 128 / (4 * 2), "4·d FLOPs per pair against four 2-byte numbers"),
    "fused_attention.3": Answer(lambda: (8 * 1024 + 4) / (2 * 1024), "8·N + 4·rows elements against 2·N"),
    "mixture_of_experts.1": Answer(lambda: 8 * (1 - (1 - 2 / 8) ** 4), "E·(1 − (1 − k/E)^B)"),
    "mixture_of_experts.2": Answer(lambda: 1.25 * 4096 * 2 / 64, "tokens × k / E, times the capacity factor"),
    "mixture_of_experts.3": Answer(lambda: 2 * 12.9e9, "2 FLOPs per parameter a token uses: the active ones"),
    "generating_images.1": Answer(lambda: 6 * 4 / (50 * 2), "4 calls instead of 50 x 2"),
    "generating_images.2": Answer(lambda: (1024 // 8 // 2) ** 2, "pixels / 8 per side, then 2x2 patches"),
    "generating_images.3": Answer(
        lambda: _attention_overtakes(), "attention is 4·N²·d per block, the linear terms about 24·N·d²"
    ),
    "input_size.1": Answer(lambda: 3 * (4000 / 1000) ** 2, "4x the tokens, squared"),
    "input_size.2": Answer(lambda: math.log(20 / 2) / math.log(10_000 / 1_000), "log(time ratio) / log(size ratio)"),
    "input_size.3": Answer(
        lambda n_items, per_item_ms: next(
            n for n, p in zip(n_items, per_item_ms, strict=True) if p <= 1.1 * min(per_item_ms)
        ),
        "compare each per_item_ms with 1.1 * min(per_item_ms)",
        ("n_items", "per_item_ms"),
    ),  # fmt: skip
    "model_size.1": Answer(lambda: _gpt_matmul_weights(), "12 · L · d² + d · V"),
    "model_size.2": Answer(lambda: 2 * 7e9 / 1e9, "2 FLOPs per parameter"),
    "model_size.2 MACs": Answer(lambda: 7e9 / 1e9, "one multiply-add is 2 FLOPs"),
    "model_size.3": Answer(
        lambda vision: max(vision, key=lambda n: vision[n]["gflops_per_s"]),
        "the largest gflops_per_s in `vision`",
        ("vision",),
    ),  # fmt: skip
    "memory.1": Answer(lambda: _state_gb(13e9, "mixed adam", 1e9), "16 bytes per parameter, in GB (10⁹ bytes)"),
    "memory.2": Answer(lambda: 32768 * 32768 * 32 * 2 / 1e9, "T · T · heads · 2 bytes"),
    "memory.3": Answer(_fits_7b, "state alone is 16 bytes per parameter", ("saved_per_token_layer",)),
    "batch_size.1": Answer(
        lambda: _intensity(2 * 4096 * 4096, 4 * (4096 * 4096 + 4096 + 4096)),
        "2·B·n_in·n_out / (4·(n_in·n_out + B·n_in + B·n_out)) with B = 1",
    ),  # fmt: skip
    "batch_size.2": Answer(lambda: math.floor((24 - 6) / 0.25), "(budget - state) / per sample, rounded down"),
    "batch_size.3": Answer(lambda: 64 / 1024, "the micro-batch losses must add up to the mean over the whole batch"),
    "batch_size.4": Answer(lambda: (16 - 1) / 200 * 1e3, "(B - 1) / R seconds"),
    "multiple_gpus.1": Answer(lambda: 2 * (8 - 1) / 8 * 7e9 * 2 / 1e9, "2(N-1)/N x gradient bytes"),
    "multiple_gpus.2": Answer(lambda: 100 * 2 * (8 - 1) / 8, "busbw = algbw x 2(n-1)/n"),
    "multiple_gpus.3": Answer(
        lambda: 100 / (100 / 4 + 15) / 4, "step = 100/4 + 15 ms; speed-up = 100 / step; efficiency = speed-up / 4"
    ),
    "sharding.1": Answer(lambda: _zero_gb(13e9, 2, 16), "weights whole; gradients and optimizer state divided by 16"),
    "sharding.2": Answer(lambda: (4 - 1) / (12 + 4 - 1), "(p - 1) / (m + p - 1)"),
    "sharding.3": Answer(
        lambda: 2 + 2, "one per block forward (attention, MLP), one per block's input gradient backward"
    ),
    "checkpoints.1": Answer(
        lambda: _checkpoint_gb(13e9, "mixed adam"),
        "Megatron-LM's layout: the 16-bit weights beside 12 bytes of fp32 state (master copy, two moments); no gradients",
    ),
    "checkpoints.2": Answer(lambda: math.sqrt(2 * 60 * 6 * 3600) / 60, "τ = √(2·C·M), in minutes"),
    "checkpoints.3": Answer(
        lambda killed_after, every: (killed_after + 1) % every,
        "the steps after the last checkpoint",
        ("killed_after", "every"),
    ),
    "latency_throughput.1": Answer(
        lambda: 4 + 0.8 * 4 / (2 * (1 - 0.8)), "ρ = λS = 0.8; mean wait = ρS / (2(1 - ρ)), plus S"
    ),
    "latency_throughput.2": Answer(lambda: 3350e9 / (7e9 * 2), "bandwidth / bytes of weights"),
    "latency_throughput.3": Answer(
        lambda: True, "a batch of 256 takes 256 / 20,000 s to compute, and every request in it waits"
    ),
    "serving_llms.1": Answer(
        lambda: 2 * 32 * 8 * 128 * 2, "a key and a value per layer and key/value head, 2 bytes each"
    ),
    "serving_llms.2": Answer(lambda: (4.2 - 0.6) / (241 - 1) * 1000, "(E2E - TTFT) / (output tokens - 1), in ms"),
    "serving_llms.3": Answer(lambda: (1 - 0.7**5) / (1 - 0.7), "(1 - α^(k+1)) / (1 - α)"),
    "serving_endpoint.1": Answer(lambda: len("naïve café".encode()), "one token per UTF-8 byte; ï and é take two"),
    "serving_endpoint.2": Answer(lambda: 3.00 / (2400 * 3600) * 1e6, "price per hour / (tokens per hour) × 1e6"),
    "serving_endpoint.3": Answer(
        lambda: (3**2 + 0.5**2) / (1**2 + 0.5**2), "Kingman: the wait grows with (c_a² + c_s²) / 2"
    ),
    "optimisation.1": Answer(lambda: 30 / (0.012 - 0.008), "compile time / time saved per call"),
    "optimisation.2": Answer(lambda: 7e9 * 1 / 1e9, "one byte per parameter"),
    "optimisation.3": Answer(lambda: min(4000, 8 * 1000 / 1), "the slower of the two stages sets the pace"),
    "where_time_goes.1": Answer(lambda: 1 / ((1 - 0.4) + 0.4 / 5), "only the 40% computing speeds up (Amdahl)"),
    "where_time_goes.2": Answer(
        lambda: math.ceil(256 * 2 / 100), "256 images x 2 ms of CPU per 100 ms of GPU, rounded up"
    ),
    "where_time_goes.3": Answer(lambda: "b", "the value does not exist until the GPU has computed it"),
    "sharing_a_gpu.1": Answer(lambda: (5 + 7) / 16, "(inference busy + training busy) / all GPUs"),
    "sharing_a_gpu.2": Answer(lambda: 30 / 2, "a preemption lands anywhere between two checkpoints"),
    "sharing_a_gpu.3": Answer(_smallest_static, "try k = 1, 2, ... and look at slo_violation", ("workload", "n_gpus")),
    "estimating_a_job.1": Answer(
        lambda: _line_at([10_000, 20_000], [12, 21], 200_000), "slope 9 s per 10,000 samples, one-off 3 s"
    ),
    "estimating_a_job.2": Answer(lambda: 6 * 7e9 * 1e12 / (64 * 989e12 * 0.4) / 3600, "6 x parameters x tokens FLOPs"),
    "estimating_a_job.3": Answer(
        _capstone, "call estimate_workload with your workload, make it fit, copy its hours", ("card",)
    ),
}


@dataclass(frozen=True)
class Prediction:
    """A predict-then-measure exercise: how close a prediction must come to this machine's measurement (a
    factor ``within`` either way), and the hint for one that the measurement contradicts."""

    within: float
    hint: str


# The learner predicts a ratio (or a size) from first principles, then measures it on their own machine.
# ``within`` is the modelling error the first-principles answer is allowed, not a margin for noise: noise is
# handled by the interval (labkit.claims), so a noisy run gives "undecided", never "holds" for a wrong guess.
PREDICTIONS: dict[str, Prediction] = {
    "start_here.4": Prediction(1.5, "both products are compute-bound on your roofline: time follows FLOPs, 2·n³"),
    "inference_vs_training.4": Prediction(
        1.5, "a step's FLOPs are 6 x parameters x samples: count the parameters of both models"
    ),
    "input_size.4": Prediction(1.5, "the score matrix has T x T entries for every head"),
    "fused_attention.4": Prediction(1.5, "the FLOPs and the score traffic both grow as T²"),
    "mixture_of_experts.4": Prediction(
        1.5,
        "a step reads the experts its 8 tokens chose: E·(1 − (1 − k/E)^8) / k with this layer's E and k, "
        "experts.expected_distinct_experts(8, E, k) / k (on a GPU the batch-1 step is launch-bound: section 5)",
    ),
    "generating_images.4": Prediction(1.25, "the network runs once per step; the rest of the loop is small"),
    "model_size.4": Prediction(1.5, "the matmul weights grow as d²; count both models' FLOPs with labkit.count_flops"),
    "memory.4": Prediction(1.05, "Adam keeps two float32 numbers (exp_avg, exp_avg_sq) per parameter"),
    "batch_size.5": Prediction(
        1.5, "past the ridge a step is compute-bound: time follows FLOPs, which follow the batch"
    ),
    "multiple_gpus.4": Prediction(
        1.5, "the ring model: time = 2(n-1)·latency + 2(n-1)/n · bytes / bandwidth, fitted above"
    ),
    "sharding.4": Prediction(1.5, "a step is (m + p - 1) micro-batch times: the fill and drain are paid once per step"),
    "checkpoints.4": Prediction(1.5, "a save is its bytes over the disk's bandwidth: count both models' parameters"),
    "latency_throughput.4": Prediction(
        1.5, "all requests arrive at once; served one at a time, the k-th waits for k service times"
    ),
    "serving_llms.4": Prediction(
        1.5, "a decode step is memory-bound: the weights once, the cache three times (copied, then read)"
    ),
    "serving_endpoint.4": Prediction(
        1.5, "a decode step reads the weights once for the whole batch and each user's own cache"
    ),
    "optimisation.4": Prediction(1.5, "only the first request for each image does the work; the other 90 are lookups"),
    "where_time_goes.4": Prediction(
        1.25, "backward computes two matmuls per layer (input and weight gradients), forward one"
    ),
    "sharing_a_gpu.4": Prediction(
        1.5, "the request waits for the whole training step (forward + backward = 3 forwards), then runs"
    ),
    "estimating_a_job.4": Prediction(
        1.5, "FLOPs per token grow with the context (attention); count both steps with labkit.count_flops"
    ),
}
