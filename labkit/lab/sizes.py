"""Experiment sizes: the quick and full sizes of every notebook, in one place (the profile picks which).

Taught in notebook `start_here`. A notebook's ``parameters`` cell holds ``PROFILE = "auto"``; papermill may
override it, and nbval (which cannot inject parameters) sets ``LABKIT_PROFILE`` instead.

- ``quick``: fits each notebook into its CI budget on 2 CPU cores.
- ``full``: the real lesson, on a GPU or a patient laptop.
- ``auto``: ``LABKIT_PROFILE`` if set, else ``full`` on a CUDA GPU with the memory and speed the full sizes
  need (:func:`choose_profile`) and ``quick`` elsewhere.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from ..core import environment
from . import manifest

PROFILE_ENV = "LABKIT_PROFILE"
PROFILES = ("quick", "full", "auto")

# Notebook `batch_size`'s optimisation half: a small learnable task (a teacher network's labels), trained with plain SGD to a
# test-accuracy target at each batch size and learning rate. Seeded, so the step counts are facts of the run.
LARGE_BATCH = dict(
    d_in=16,
    hidden=64,
    classes=4,
    n_train=8192,
    n_test=1024,
    target=0.8,
    batches=[4, 16, 64, 256, 1024],
    lrs=[0.1, 0.3, 1.0, 3.0],
    max_steps=300,
    big_lr=15.0,
    warmup_steps=100,
    warmup_max_steps=150,
    seeds=3,
)

# Every experiment's sizes, per notebook and profile. ``min_run_s`` is the time labkit.measure
# spends per measurement; everything else is the notebook's own knobs.
SIZES: dict[str, dict[str, dict]] = {
    "start_here": {
        "quick": dict(matmul_n=1024, copy_mib=128, matvec_n=8192, single_shots=20, min_run_s=0.2),
        "full": dict(matmul_n=4096, copy_mib=1024, matvec_n=16384, single_shots=50, min_run_s=1.0),
    },
    "inference_vs_training": {
        "quick": dict(
            batch=256, d_in=256, hidden=1024, depth=3, classes=10, lora_rank=8,
            train_samples=8192, epochs=3, min_run_s=0.2,
        ),
        "full": dict(
            batch=512, d_in=512, hidden=4096, depth=4, classes=10, lora_rank=16,
            train_samples=65536, epochs=5, min_run_s=1.0,
        ),
    },
    "input_size": {
        "quick": dict(
            items=[1, 2, 4, 16, 64, 256], image_size=32, resolutions=[32, 64, 96, 128, 192], resolution_batch=4,
            seq_lens=[256, 512, 1024, 2048, 4096], mem_seq_lens=[256, 512, 1024, 2048], heads=4, head_dim=64,
            chunk_s=10, audio_fit_s=[40, 80, 160], audio_check_s=320, min_run_s=0.1,
        ),
        "full": dict(
            items=[1, 2, 4, 16, 64, 256, 1024, 4096], image_size=32, resolutions=[64, 128, 224, 384, 512],
            resolution_batch=16, seq_lens=[512, 1024, 2048, 4096, 8192, 16384], mem_seq_lens=[512, 1024, 2048, 4096, 8192],
            heads=8, head_dim=64, chunk_s=10, audio_fit_s=[120, 240, 480], audio_check_s=1200, min_run_s=0.5,
        ),
    },
    "model_size": {
        "quick": dict(
            # ViT-B/16 is timed in the full profile only: on a CPU one image costs it more than the other five together.
            gpt_sizes=["xs", "s", "m"], batch=8, seq_len=128, image_batch=1,
            vision=["mobilenet_v3_small", "mobilenet_v3_large", "resnet18", "resnet34", "resnet50"],
            train_samples=8192, epochs=4, small=(128, 2), large=(1024, 4), min_run_s=0.1,
        ),
        "full": dict(
            gpt_sizes=["xs", "s", "m", "l"], batch=16, seq_len=256, image_batch=8,
            vision=["mobilenet_v3_small", "mobilenet_v3_large", "resnet18", "resnet34", "resnet50", "vit_b_16"],
            train_samples=65536, epochs=4, small=(128, 2), large=(1024, 4), min_run_s=0.5,
        ),
    },
    "memory": {
        "quick": dict(
            d_in=256, hidden=512, depth=4, batch=64, act_batches=[64, 128, 256, 512],
            attn_seq_lens=[128, 256, 512, 1024], heads=4, head_dim=32,
            ckpt_batch=2048, ckpt_hidden=256, ckpt_depth=16, ckpt_segments=4,
            calib_size="m", calib_batch=4, calib_seq=256,
            big_d_model=2048, big_layers=24, big_heads=16, big_batch=1, big_seq=256,
            budget_gb=16, offload_mib=256, ballast_gib=1, min_run_s=0.2,
        ),
        "full": dict(
            d_in=1024, hidden=4096, depth=4, batch=256, act_batches=[256, 512, 1024, 2048],
            attn_seq_lens=[512, 1024, 2048, 4096], heads=8, head_dim=64,
            ckpt_batch=8192, ckpt_hidden=1024, ckpt_depth=16, ckpt_segments=4,
            calib_size="l", calib_batch=4, calib_seq=256,
            big_d_model=2048, big_layers=24, big_heads=16, big_batch=4, big_seq=1024,
            budget_gb=24, offload_mib=1024, ballast_gib=8, min_run_s=0.5,
        ),
    },
    "batch_size": {
        "quick": dict(
            d_in=256, hidden=1024, depth=3, classes=10, batches=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
            odd_batches=[3, 100, 300], budget_mib=40, accum_batch=2048, accum_micro=[1, 8],
            load_fraction=0.5, min_run_s=0.1, large_batch=LARGE_BATCH,
        ),
        "full": dict(
            d_in=1024, hidden=4096, depth=4, classes=10,
            batches=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192],
            odd_batches=[3, 100, 3000], budget_mib=2048, accum_batch=16384, accum_micro=[1, 2, 4, 8, 16],
            load_fraction=0.5, min_run_s=0.5, large_batch=dict(LARGE_BATCH, batches=[4, 8, 16, 32, 64, 128, 256, 512, 1024]),
        ),
    },
    "generating_images": {
        "quick": dict(
            width=128, depth=2, heads=4, steps=[4, 25, 50], steps_side=16, guidance=4.0, cfg_side=32,
            frame_side=16, frames=[4, 8, 16, 32], image_sides=[32, 64], batch_side=16, prompts=4,
            mem_sides=[16, 32, 48, 64], decoder_widths=(64, 64, 32, 32),
        ),
        "full": dict(
            width=512, depth=8, heads=8, steps=[4, 25, 50], steps_side=32, guidance=4.0, cfg_side=64,
            frame_side=32, frames=[2, 4, 8, 16], image_sides=[64, 128], batch_side=32, prompts=8,
            mem_sides=[32, 64, 96, 128], decoder_widths=(256, 256, 128, 64),
        ),
    },
    "fused_attention": {
        "quick": dict(batch_heads=4, head_dim=64, block=256, mem_tokens=[128, 256, 512, 1024], tokens=[256, 1024, 2048],
                      softmax_shape=(4096, 4096)),
        "full": dict(batch_heads=8, head_dim=64, block=256, mem_tokens=[256, 512, 1024, 2048, 4096],
                     tokens=[512, 2048, 4096], softmax_shape=(8192, 8192)),
    },
    "mixture_of_experts": {
        "quick": dict(
            counting=dict(width=64, hidden=128, tokens=64, experts=[4, 8, 16, 32, 64]),
            capacity=dict(width=64, hidden=128, experts=16, tokens=256, factors=[1.0, 1.25, 1.5, 2.0], batches=200),
            model=dict(width=512, hidden=1024, experts=16, top_k=2), distinct_batches=[1, 2, 4, 8, 16, 32],
            distinct_samples=200, decode_batch=16,
            expert_parallel=dict(width=128, hidden=256, experts=8, top_k=2, tokens=512), timeout_s=120,
        ),
        "full": dict(
            counting=dict(width=256, hidden=512, tokens=256, experts=[4, 8, 16, 32, 64, 128]),
            capacity=dict(width=128, hidden=256, experts=64, tokens=2048, factors=[1.0, 1.25, 1.5, 2.0], batches=400),
            model=dict(width=1024, hidden=2048, experts=32, top_k=2), distinct_batches=[1, 2, 4, 8, 16, 32, 64, 128],
            distinct_samples=400, decode_batch=32,
            expert_parallel=dict(width=1024, hidden=2048, experts=16, top_k=2, tokens=4096), timeout_s=300,
        ),
    },
    "multiple_gpus": {
        "quick": dict(
            d_in=256, hidden=1024, depth=3, classes=10, global_batch=256, steps=5,
            buckets_mb={"overlap: 1 MB buckets": 1, "no overlap: one bucket": 64},
            allreduce_sizes=[4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20],
            timeout_s=120, hang_timeout_s=3, min_run_s=0.1,
        ),
        "full": dict(
            d_in=1024, hidden=4096, depth=4, classes=10, global_batch=1024, steps=10,
            buckets_mb={"overlap: 1 MB buckets": 1, "no overlap: one bucket": 1024},
            allreduce_sizes=[4096, 65536, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30],
            timeout_s=600, hang_timeout_s=10, min_run_s=0.5,
        ),
    },
    "sharding": {
        "quick": dict(
            sharding=dict(width=256, depth=4, classes=10, global_batch=64, steps=3, rounds=5),
            tensor=dict(d_model=64, head_dim=16, batch=2, tokens=16),
            pipeline=dict(width=256, layers_per_stage=2, micro_batch=128, microbatches=[2, 4, 8], rounds=7),
            timeout_s=120,
        ),
        "full": dict(
            sharding=dict(width=1024, depth=8, classes=10, global_batch=256, steps=5, rounds=7),
            tensor=dict(d_model=512, head_dim=64, batch=4, tokens=128),
            pipeline=dict(width=1024, layers_per_stage=4, micro_batch=64, microbatches=[2, 4, 8, 16], rounds=7),
            timeout_s=600,
        ),
    },
    "checkpoints": {
        "quick": dict(
            d_in=256, hidden=1024, depth=3, classes=10, batch=64, shard_width=256, shard_depth=4,
            train_steps=300, every=100, kill_after=150, overlap_steps=2, example_save_s=60.0, example_restart_s=300.0,
            example_mtbf_s=6 * 3600.0, cluster_save_s=60.0, data_files=16, data_file_bytes=4 << 20,
        ),
        "full": dict(
            d_in=1024, hidden=4096, depth=3, classes=10, batch=256, shard_width=1024, shard_depth=4,
            train_steps=3000, every=500, kill_after=1700, overlap_steps=4, example_save_s=60.0, example_restart_s=300.0,
            example_mtbf_s=6 * 3600.0, cluster_save_s=60.0, data_files=64, data_file_bytes=32 << 20,
        ),
    },
    "latency_throughput": {
        "quick": dict(
            d_in=256, hidden=1024, depth=3, classes=10, single_n=300, offline_n=300, max_batches=[1, 8, 32, 128],
            max_wait_ms=2.0, loads=[0.5, 0.8, 0.95, 1.5, 3, 6], server_n=200, p99_bound_ms=10.0,
            http_rate=300, http_n=300, gpt_size="l", prompt_len=16, new_tokens=12, decode_batches=[1, 8, 32],
            speech_tokens_per_s=3.3, utterance_s=2.0, job_audio_s=3600, job_deadline_s=600, live_bound_s=1.0,
            min_run_s=0.1,
        ),
        "full": dict(
            d_in=1024, hidden=4096, depth=4, classes=10, single_n=1000, offline_n=20000, max_batches=[1, 8, 32, 128, 512],
            max_wait_ms=2.0, loads=[0.2, 0.5, 0.8, 0.95, 1.5, 3, 6, 12], server_n=2000, p99_bound_ms=10.0,
            http_rate=500, http_n=2000, gpt_size="l", prompt_len=128, new_tokens=128,
            decode_batches=[1, 4, 16, 64, 256], speech_tokens_per_s=3.3, utterance_s=2.0, job_audio_s=3600,
            job_deadline_s=600, live_bound_s=1.0, min_run_s=0.5,
        ),
    },
    "serving_llms": {
        "quick": dict(
            gpt_size="s", context=512, prompt_len=128, decode_batch=16, short_ctx=64, long_ctx=448, requests=20,
            max_batch=8, block_size=16, prompt_lens=(8, 48), output_lens=(4, 48), load=0.8, slo_ttft_steps=10,
            slo_tpot_steps=2, claim_budget_s=5.0, paged_requests=32, budget_seqs=2, paged_max_batch=32,
            spec_size="m", draft_layers=1, spec_k=3, spec_prompt=16, spec_tokens=48, latency_samples=1000, window=50,
            min_run_s=0.1, prefix_shared=192, prefix_own=16, prefix_out=4, prefix_requests=6, prefix_gap_s=0.03,
            chunk_requests=16, chunk_prompt_lens=(16, 320), chunk_output_lens=(8, 32), prefill_chunk=32,
        ),
        "full": dict(
            gpt_size="m", context=1024, prompt_len=512, decode_batch=32, short_ctx=128, long_ctx=960, requests=64,
            max_batch=16, block_size=16, prompt_lens=(16, 128), output_lens=(8, 128), load=0.8, slo_ttft_steps=10,
            slo_tpot_steps=2, claim_budget_s=20.0, paged_requests=96, budget_seqs=4, paged_max_batch=64,
            spec_size="l", draft_layers=1, spec_k=3, spec_prompt=32, spec_tokens=128, latency_samples=5000, window=50,
            min_run_s=0.5, prefix_shared=512, prefix_own=32, prefix_out=8, prefix_requests=8, prefix_gap_s=0.05,
            chunk_requests=48, chunk_prompt_lens=(16, 768), chunk_output_lens=(16, 64), prefill_chunk=64,
        ),
    },
    "optimisation": {
        "quick": dict(
            n_images=1536, image_size=96, out_size=32, noise=8.0, train=1024, hidden=1024, depth=3,
            small_hidden=256, small_depth=2, epochs=2, batch=64, loader_workers=[0, 1], loader_batch=64,
            loader_images=384, repeat_fraction=0.5, cache_requests=200, gpt_size="m", new_tokens=32, compile=False,
            min_run_s=0.1, decode_width=2048, decode_layers=4,
        ),
        "full": dict(
            n_images=8192, image_size=128, out_size=32, noise=8.0, train=6144, hidden=2048, depth=4,
            small_hidden=512, small_depth=2, epochs=3, batch=256, loader_workers=[0, 1, 2, 4, 8], loader_batch=256,
            loader_images=2048, repeat_fraction=0.5, cache_requests=2000, gpt_size="l", new_tokens=128, compile=True,
            min_run_s=0.5, decode_width=4096, decode_layers=8,
        ),
    },
    "where_time_goes": {
        "quick": dict(
            n_images=1024, image_size=96, blur_sigma=1.5, hidden=1024, depth=3, batch=64, steps=12,
            workers=[0, 1], profile_steps=5, sync_steps=30, min_run_s=0.1,
        ),
        "full": dict(
            n_images=4096, image_size=128, blur_sigma=1.5, hidden=2048, depth=4, batch=256, steps=30,
            workers=[0, 1, 2, 4, 8], profile_steps=10, sync_steps=100, min_run_s=0.5,
        ),
    },
    "sharing_a_gpu": {
        "quick": dict(
            d_in=256, hidden=1024, depth=3, classes=10, max_batch=8, max_wait_ms=1.0, rate=1000, requests=300,
            watch_s=0.5, n_gpus=16, inference_gpus=9, peak_gpus=9, trough_gpus=1.5,
            jobs_per_hour=3.5, job_gpu_hours=7.0, preemption_cost_s=300, min_run_s=0.1, trainer_max_s=300,
        ),
        "full": dict(
            d_in=1024, hidden=4096, depth=4, classes=10, max_batch=32, max_wait_ms=2.0, rate=2000, requests=10000,
            watch_s=5.0, n_gpus=64, inference_gpus=36, peak_gpus=36, trough_gpus=6,
            jobs_per_hour=14.0, job_gpu_hours=7.0, preemption_cost_s=300, min_run_s=0.5, trainer_max_s=1800,
        ),
    },
    "estimating_a_job": {
        "quick": dict(
            d_in=256, hidden=1024, depth=3, classes=10, batch=128, epochs=2, probe_sizes=[200, 400, 600, 800],
            repeats=2, full_size=8000, small_hidden=512, budget_gib=1.0, energy_run_s=0.5, energy_new_tokens=16,
        ),
        "full": dict(
            d_in=512, hidden=4096, depth=4, classes=10, batch=512, epochs=2, probe_sizes=[5000, 10000, 15000, 20000],
            repeats=2, full_size=200000, small_hidden=2048, budget_gib=16.0, energy_run_s=2.0, energy_new_tokens=64,
        ),
    },
}  # fmt: skip


# What the full profile is sized for: it ran on datacenter GPUs (results/reference), where the largest notebook
# needs a few GiB at once (notebook `memory`'s 8 GiB ballast beside its models; `input_size`'s naive attention
# scores at 8,192 tokens, 4.3 GB, beside their softmax) and `estimating_a_job` searches up to a 16 GiB budget.
# Below these, "auto" keeps the quick sizes: a 16 GB T4 or an 8 GB laptop GPU would run out of memory, and at
# 8 TFLOP/s of float32 (a T4) the full sizes would take many times as long as on the GPUs they were sized on.
FULL_MIN_GIB = 20.0
FULL_MIN_FP32_TFLOPS = 20.0


def full_profile_shortfall(memory_gib: float, fp32_tflops: float, gpu: str) -> str | None:
    """Why the full profile does not fit a GPU with ``memory_gib`` (as it reports it) and ``fp32_tflops``.

    None when it fits; :func:`choose_profile` reads the figures from the device (the profiles: notebook `start_here`).
    """
    short = []
    if memory_gib < FULL_MIN_GIB:
        short.append(f"{memory_gib:.1f} GiB of memory (the full sizes want {FULL_MIN_GIB:.0f})")
    if fp32_tflops < FULL_MIN_FP32_TFLOPS:
        short.append(f"{fp32_tflops:.1f} TFLOP/s of float32 (the full sizes want {FULL_MIN_FP32_TFLOPS:.0f})")
    return f"this {gpu} has " + " and ".join(short) if short else None


def _device_shortfall(device: torch.device) -> str | None:
    from ..instruments import ceilings

    if not torch.cuda.is_available():  # a CUDA device named on a machine without one: nothing to read
        return None
    name = torch.cuda.get_device_name(device)
    memory_gib = torch.cuda.get_device_properties(device).total_memory / 2**30
    sheet = ceilings.datasheet_for(name)
    if sheet is not None:
        fp32 = sheet.fp32_tflops
    else:  # a GPU without a datasheet row: a quarter of a second of matmuls says how fast it is
        fp32 = ceilings.measure_matmul_ceiling(device, torch.float32, n=2048, min_run_s=0.05).value / 1e12
    return full_profile_shortfall(memory_gib, fp32, name)


def choose_profile(value: str | None = "auto", device: torch.device | str | None = None) -> tuple[str, str | None]:
    """Turn a ``PROFILE`` parameter into ``"quick"`` or ``"full"``, with the reason when the device decided.

    Called by ``labkit.start`` (the profiles: notebook `start_here`). An unknown value raises ``ValueError`` listing the allowed ones, so a typo in
    a parameters cell or in ``LABKIT_PROFILE`` stops the notebook at its first cell rather than running the wrong
    sizes for minutes. "auto" picks "full" on a CUDA GPU that has what the full sizes need (:data:`FULL_MIN_GIB`,
    :data:`FULL_MIN_FP32_TFLOPS`) and "quick" elsewhere; the reason says what fell short. An explicit "full" is
    obeyed, and the reason is then a warning of what may happen.
    """
    requested = (value or "auto").strip().lower()
    if requested not in PROFILES:
        raise ValueError(f"unknown profile {value!r}; allowed: {', '.join(PROFILES)}")
    if requested == "auto":
        requested = environment.get(PROFILE_ENV) or "auto"
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if requested == "quick" or dev.type != "cuda":
        return ("full" if requested == "full" else "quick"), None
    shortfall = _device_shortfall(dev)
    if requested == "full":
        return "full", None if shortfall is None else f"{shortfall}: the full sizes may run out of memory or for long"
    if shortfall is None:
        return "full", None
    return "quick", f'{shortfall}: quick sizes (PROFILE = "full" runs the full ones anyway)'


def resolve_profile(value: str | None = "auto", device: torch.device | str | None = None) -> str:
    """The profile :func:`choose_profile` picks, without its reason (notebook `start_here`)."""
    return choose_profile(value, device)[0]


def settings(notebook: str, profile: str) -> SimpleNamespace:
    """The sizes of ``notebook``'s experiments for a resolved ``profile`` ("quick" or "full").

    ``notebook`` is a slug of :data:`labkit.lab.manifest.NOTEBOOKS` (an unknown one is an error listing them); a
    notebook without experiments to size has no entry in :data:`SIZES` and gets only its name and profile.
    """
    manifest.entry(notebook)
    if profile not in ("quick", "full"):
        raise ValueError(f"profile must be resolved to 'quick' or 'full' first, got {profile!r}")
    return SimpleNamespace(notebook=notebook, profile=profile, **SIZES.get(notebook, {}).get(profile, {}))
