"""Every notebook's experiment sizes: one frozen dataclass per notebook, with its quick and full instances.

Taught in notebook `start_here` (the profiles). ``lab.cfg`` is one of these instances, so a misspelt size is an
error naming the fields (and the structure tests check every ``cfg.<name>`` a notebook uses against its class).
``min_run_s`` is the time labkit.measure spends per measurement; everything else is the notebook's own knobs.
The quick sizes fit each notebook into its CI budget on 2 CPU cores; the full ones are the real lesson.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Sizes:
    """What every notebook's sizes carry: which notebook and which profile they are (filled by ``settings``)."""

    notebook: str = field(default="", kw_only=True)
    profile: str = field(default="", kw_only=True)


SIZES: dict[str, dict[str, Sizes]] = {}


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


@dataclass(frozen=True)
class StartHereSizes(Sizes):
    """Notebook `start_here`'s sizes."""

    matmul_n: int
    copy_mib: int
    matvec_n: int
    single_shots: int
    min_run_s: float


# fmt: off
SIZES["start_here"] = {
    "quick": StartHereSizes(matmul_n=1024, copy_mib=128, matvec_n=8192, single_shots=20, min_run_s=0.2),
    "full": StartHereSizes(matmul_n=4096, copy_mib=1024, matvec_n=16384, single_shots=50, min_run_s=1.0),
}
# fmt: on


@dataclass(frozen=True)
class InferenceVsTrainingSizes(Sizes):
    """Notebook `inference_vs_training`'s sizes."""

    batch: int
    d_in: int
    hidden: int
    depth: int
    classes: int
    lora_rank: int
    train_samples: int
    epochs: int
    min_run_s: float


# fmt: off
SIZES["inference_vs_training"] = {
    "quick": InferenceVsTrainingSizes(batch=256, d_in=256, hidden=1024, depth=3, classes=10, lora_rank=8,
        train_samples=8192, epochs=3, min_run_s=0.2),
    "full": InferenceVsTrainingSizes(batch=512, d_in=512, hidden=4096, depth=4, classes=10, lora_rank=16,
        train_samples=65536, epochs=5, min_run_s=1.0),
}
# fmt: on


@dataclass(frozen=True)
class InputSizeSizes(Sizes):
    """Notebook `input_size`'s sizes."""

    items: list[int]
    image_size: int
    resolutions: list[int]
    resolution_batch: int
    seq_lens: list[int]
    mem_seq_lens: list[int]
    heads: int
    head_dim: int
    chunk_s: int
    audio_fit_s: list[int]
    audio_check_s: int
    min_run_s: float


# fmt: off
SIZES["input_size"] = {
    "quick": InputSizeSizes(items=[1, 2, 4, 16, 64, 256], image_size=32, resolutions=[32, 64, 96, 128, 192],
        resolution_batch=4, seq_lens=[256, 512, 1024, 2048, 4096], mem_seq_lens=[256, 512, 1024, 2048], heads=4,
        head_dim=64, chunk_s=10, audio_fit_s=[40, 80, 160], audio_check_s=320, min_run_s=0.1),
    "full": InputSizeSizes(items=[1, 2, 4, 16, 64, 256, 1024, 4096], image_size=32, resolutions=[64, 128, 224, 384,
        512], resolution_batch=16, seq_lens=[512, 1024, 2048, 4096, 8192, 16384], mem_seq_lens=[512, 1024, 2048, 4096,
        8192], heads=8, head_dim=64, chunk_s=10, audio_fit_s=[120, 240, 480], audio_check_s=1200, min_run_s=0.5),
}
# fmt: on


@dataclass(frozen=True)
class ModelSizeSizes(Sizes):
    """Notebook `model_size`'s sizes."""

    gpt_sizes: list[str]
    batch: int
    seq_len: int
    image_batch: int
    vision: list[str]
    train_samples: int
    epochs: int
    small: tuple[int, ...]
    large: tuple[int, ...]
    min_run_s: float


# fmt: off
SIZES["model_size"] = {
    "quick": ModelSizeSizes(gpt_sizes=["xs", "s", "m"], batch=8, seq_len=128, image_batch=1,
        vision=["mobilenet_v3_small", "mobilenet_v3_large", "resnet18", "resnet34", "resnet50"], train_samples=8192,
        epochs=4, small=(128, 2), large=(1024, 4), min_run_s=0.1),
    "full": ModelSizeSizes(gpt_sizes=["xs", "s", "m", "l"], batch=16, seq_len=256, image_batch=8,
        vision=["mobilenet_v3_small", "mobilenet_v3_large", "resnet18", "resnet34", "resnet50", "vit_b_16"],
        train_samples=65536, epochs=4, small=(128, 2), large=(1024, 4), min_run_s=0.5),
}
# fmt: on


@dataclass(frozen=True)
class MemorySizes(Sizes):
    """Notebook `memory`'s sizes."""

    d_in: int
    hidden: int
    depth: int
    batch: int
    act_batches: list[int]
    attn_seq_lens: list[int]
    heads: int
    head_dim: int
    ckpt_batch: int
    ckpt_hidden: int
    ckpt_depth: int
    ckpt_segments: int
    calib_size: str
    calib_batch: int
    calib_seq: int
    big_d_model: int
    big_layers: int
    big_heads: int
    big_batch: int
    big_seq: int
    budget_gb: int
    offload_mib: int
    ballast_gib: int
    min_run_s: float


# fmt: off
SIZES["memory"] = {
    "quick": MemorySizes(d_in=256, hidden=512, depth=4, batch=64, act_batches=[64, 128, 256, 512], attn_seq_lens=[128,
        256, 512, 1024], heads=4, head_dim=32, ckpt_batch=2048, ckpt_hidden=256, ckpt_depth=16, ckpt_segments=4,
        calib_size="m", calib_batch=4, calib_seq=256, big_d_model=2048, big_layers=24, big_heads=16, big_batch=1,
        big_seq=256, budget_gb=16, offload_mib=256, ballast_gib=1, min_run_s=0.2),
    "full": MemorySizes(d_in=1024, hidden=4096, depth=4, batch=256, act_batches=[256, 512, 1024, 2048],
        attn_seq_lens=[512, 1024, 2048, 4096], heads=8, head_dim=64, ckpt_batch=8192, ckpt_hidden=1024, ckpt_depth=16,
        ckpt_segments=4, calib_size="l", calib_batch=4, calib_seq=256, big_d_model=2048, big_layers=24, big_heads=16,
        big_batch=4, big_seq=1024, budget_gb=24, offload_mib=1024, ballast_gib=8, min_run_s=0.5),
}
# fmt: on


@dataclass(frozen=True)
class BatchSizeSizes(Sizes):
    """Notebook `batch_size`'s sizes."""

    d_in: int
    hidden: int
    depth: int
    classes: int
    batches: list[int]
    odd_batches: list[int]
    budget_mib: int
    accum_batch: int
    accum_micro: list[int]
    load_fraction: float
    min_run_s: float
    large_batch: dict[str, Any]


# fmt: off
SIZES["batch_size"] = {
    "quick": BatchSizeSizes(d_in=256, hidden=1024, depth=3, classes=10, batches=[1, 2, 4, 8, 16, 32, 64, 128, 256,
        512, 1024], odd_batches=[3, 100, 300], budget_mib=40, accum_batch=2048, accum_micro=[1, 8], load_fraction=0.5,
        min_run_s=0.1, large_batch=LARGE_BATCH),
    "full": BatchSizeSizes(d_in=1024, hidden=4096, depth=4, classes=10, batches=[1, 2, 4, 8, 16, 32, 64, 128, 256,
        512, 1024, 2048, 4096, 8192], odd_batches=[3, 100, 3000], budget_mib=2048, accum_batch=16384, accum_micro=[1,
        2, 4, 8, 16], load_fraction=0.5, min_run_s=0.5, large_batch=dict(LARGE_BATCH, batches=[4, 8, 16, 32, 64, 128,
        256, 512, 1024])),
}
# fmt: on


@dataclass(frozen=True)
class GeneratingImagesSizes(Sizes):
    """Notebook `generating_images`'s sizes."""

    width: int
    depth: int
    heads: int
    steps: list[int]
    steps_side: int
    guidance: float
    cfg_side: int
    frame_side: int
    frames: list[int]
    image_sides: list[int]
    batch_side: int
    prompts: int
    mem_sides: list[int]
    decoder_widths: tuple[int, ...]


# fmt: off
SIZES["generating_images"] = {
    "quick": GeneratingImagesSizes(width=128, depth=2, heads=4, steps=[4, 25, 50], steps_side=16, guidance=4.0,
        cfg_side=32, frame_side=16, frames=[4, 8, 16, 32], image_sides=[32, 64], batch_side=16, prompts=4,
        mem_sides=[16, 32, 48, 64], decoder_widths=(64, 64, 32, 32)),
    "full": GeneratingImagesSizes(width=512, depth=8, heads=8, steps=[4, 25, 50], steps_side=32, guidance=4.0,
        cfg_side=64, frame_side=32, frames=[2, 4, 8, 16], image_sides=[64, 128], batch_side=32, prompts=8,
        mem_sides=[32, 64, 96, 128], decoder_widths=(256, 256, 128, 64)),
}
# fmt: on


@dataclass(frozen=True)
class MultipleGpusSizes(Sizes):
    """Notebook `multiple_gpus`'s sizes."""

    d_in: int
    hidden: int
    depth: int
    classes: int
    global_batch: int
    steps: int
    buckets_mb: dict[str, Any]
    allreduce_sizes: list[int]
    timeout_s: int
    hang_timeout_s: int
    min_run_s: float


# fmt: off
SIZES["multiple_gpus"] = {
    "quick": MultipleGpusSizes(d_in=256, hidden=1024, depth=3, classes=10, global_batch=256, steps=5,
        buckets_mb={"overlap: 1 MB buckets": 1, "no overlap: one bucket": 64}, allreduce_sizes=[4096, 65536, 1 << 20,
        4 << 20, 16 << 20, 64 << 20], timeout_s=120, hang_timeout_s=3, min_run_s=0.1),
    "full": MultipleGpusSizes(d_in=1024, hidden=4096, depth=4, classes=10, global_batch=1024, steps=10,
        buckets_mb={"overlap: 1 MB buckets": 1, "no overlap: one bucket": 1024}, allreduce_sizes=[4096, 65536,
        1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30], timeout_s=600, hang_timeout_s=10, min_run_s=0.5),
}
# fmt: on


@dataclass(frozen=True)
class ShardingSizes(Sizes):
    """Notebook `sharding`'s sizes."""

    sharding: dict[str, Any]
    tensor: dict[str, Any]
    pipeline: dict[str, Any]
    timeout_s: int


# fmt: off
SIZES["sharding"] = {
    "quick": ShardingSizes(sharding=dict(width=256, depth=4, classes=10, global_batch=64, steps=3, rounds=5),
        tensor=dict(d_model=64, head_dim=16, batch=2, tokens=16), pipeline=dict(width=256, layers_per_stage=2,
        micro_batch=128, microbatches=[2, 4, 8], rounds=7), timeout_s=120),
    "full": ShardingSizes(sharding=dict(width=1024, depth=8, classes=10, global_batch=256, steps=5, rounds=7),
        tensor=dict(d_model=512, head_dim=64, batch=4, tokens=128), pipeline=dict(width=1024, layers_per_stage=4,
        micro_batch=64, microbatches=[2, 4, 8, 16], rounds=7), timeout_s=600),
}
# fmt: on


@dataclass(frozen=True)
class CheckpointsSizes(Sizes):
    """Notebook `checkpoints`'s sizes."""

    d_in: int
    hidden: int
    depth: int
    classes: int
    batch: int
    shard_width: int
    shard_depth: int
    train_steps: int
    every: int
    kill_after: int
    overlap_steps: int
    example_save_s: float
    example_restart_s: float
    example_mtbf_s: float
    cluster_save_s: float
    data_files: int
    data_file_bytes: int


# fmt: off
SIZES["checkpoints"] = {
    "quick": CheckpointsSizes(d_in=256, hidden=1024, depth=3, classes=10, batch=64, shard_width=256, shard_depth=4,
        train_steps=300, every=100, kill_after=150, overlap_steps=2, example_save_s=60.0, example_restart_s=300.0,
        example_mtbf_s=6 * 3600.0, cluster_save_s=60.0, data_files=16, data_file_bytes=4 << 20),
    "full": CheckpointsSizes(d_in=1024, hidden=4096, depth=3, classes=10, batch=256, shard_width=1024, shard_depth=4,
        train_steps=3000, every=500, kill_after=1700, overlap_steps=4, example_save_s=60.0, example_restart_s=300.0,
        example_mtbf_s=6 * 3600.0, cluster_save_s=60.0, data_files=64, data_file_bytes=32 << 20),
}
# fmt: on


@dataclass(frozen=True)
class LatencyThroughputSizes(Sizes):
    """Notebook `latency_throughput`'s sizes."""

    d_in: int
    hidden: int
    depth: int
    classes: int
    single_n: int
    offline_n: int
    max_batches: list[int]
    max_wait_ms: float
    loads: list[float]
    server_n: int
    p99_bound_ms: float
    http_rate: int
    http_n: int
    gpt_size: str
    prompt_len: int
    new_tokens: int
    decode_batches: list[int]
    speech_tokens_per_s: float
    utterance_s: float
    job_audio_s: int
    job_deadline_s: int
    live_bound_s: float
    min_run_s: float
    search_min_s: float  # each find_max_rate trial lasts at least this (LoadGen's minimum duration)
    search_steps: int
    loadgen_min_ms: int  # LoadGen's min_duration_ms here (mlperf.conf requires 600000)
    agree_ms: int  # each round of the LoadGen-against-labkit claim: this long for each


# fmt: off
SIZES["latency_throughput"] = {
    "quick": LatencyThroughputSizes(d_in=256, hidden=1024, depth=3, classes=10, single_n=300, offline_n=300,
        max_batches=[1, 8, 32, 128], max_wait_ms=2.0, loads=[0.5, 0.8, 0.95, 1.5, 3, 6], server_n=200,
        p99_bound_ms=10.0, http_rate=300, http_n=300, gpt_size="l", prompt_len=16, new_tokens=12, decode_batches=[1,
        8, 32], speech_tokens_per_s=3.3, utterance_s=2.0, job_audio_s=3600, job_deadline_s=600, live_bound_s=1.0,
        min_run_s=0.1, search_min_s=0.3, search_steps=5, loadgen_min_ms=300, agree_ms=150),
    "full": LatencyThroughputSizes(d_in=1024, hidden=4096, depth=4, classes=10, single_n=1000, offline_n=20000,
        max_batches=[1, 8, 32, 128, 512], max_wait_ms=2.0, loads=[0.2, 0.5, 0.8, 0.95, 1.5, 3, 6, 12], server_n=2000,
        p99_bound_ms=10.0, http_rate=500, http_n=2000, gpt_size="l", prompt_len=128, new_tokens=128,
        decode_batches=[1, 4, 16, 64, 256], speech_tokens_per_s=3.3, utterance_s=2.0, job_audio_s=3600,
        job_deadline_s=600, live_bound_s=1.0, min_run_s=0.5, search_min_s=5.0, search_steps=6, loadgen_min_ms=10000,
        agree_ms=2000),
}
# fmt: on


@dataclass(frozen=True)
class ServingLlmsSizes(Sizes):
    """Notebook `serving_llms`'s sizes."""

    gpt_size: str
    context: int
    prompt_len: int
    decode_batch: int
    short_ctx: int
    long_ctx: int
    requests: int
    max_batch: int
    block_size: int
    prompt_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    load: float
    slo_ttft_steps: int
    slo_tpot_steps: int
    claim_budget_s: float
    paged_requests: int
    budget_seqs: int
    paged_max_batch: int
    spec_size: str
    draft_layers: int
    spec_k: int
    spec_prompt: int
    spec_tokens: int
    latency_samples: int
    window: int
    min_run_s: float
    prefix_shared: int
    prefix_own: int
    prefix_out: int
    prefix_requests: int
    prefix_gap_s: float
    chunk_requests: int
    chunk_prompt_lens: tuple[int, ...]
    chunk_output_lens: tuple[int, ...]
    prefill_chunk: int


# fmt: off
SIZES["serving_llms"] = {
    "quick": ServingLlmsSizes(gpt_size="s", context=512, prompt_len=128, decode_batch=16, short_ctx=64, long_ctx=448,
        requests=20, max_batch=8, block_size=16, prompt_lens=(8, 48), output_lens=(4, 48), load=0.8,
        slo_ttft_steps=10, slo_tpot_steps=2, claim_budget_s=5.0, paged_requests=32, budget_seqs=2, paged_max_batch=32,
        spec_size="m", draft_layers=1, spec_k=3, spec_prompt=16, spec_tokens=48, latency_samples=1000, window=50,
        min_run_s=0.1, prefix_shared=192, prefix_own=16, prefix_out=4, prefix_requests=6, prefix_gap_s=0.03,
        chunk_requests=16, chunk_prompt_lens=(16, 320), chunk_output_lens=(8, 32), prefill_chunk=32),
    "full": ServingLlmsSizes(gpt_size="m", context=1024, prompt_len=512, decode_batch=32, short_ctx=128, long_ctx=960,
        requests=64, max_batch=16, block_size=16, prompt_lens=(16, 128), output_lens=(8, 128), load=0.8,
        slo_ttft_steps=10, slo_tpot_steps=2, claim_budget_s=20.0, paged_requests=96, budget_seqs=4,
        paged_max_batch=64, spec_size="l", draft_layers=1, spec_k=3, spec_prompt=32, spec_tokens=128,
        latency_samples=5000, window=50, min_run_s=0.5, prefix_shared=512, prefix_own=32, prefix_out=8,
        prefix_requests=8, prefix_gap_s=0.05, chunk_requests=48, chunk_prompt_lens=(16, 768), chunk_output_lens=(16,
        64), prefill_chunk=64),
}
# fmt: on


@dataclass(frozen=True)
class ServingEndpointSizes(Sizes):
    """Notebook `serving_endpoint`'s sizes."""

    gpt_size: str
    context: int
    max_batch: int
    block_size: int
    requests: int  # section 1's Poisson trace
    prompt_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    load: float  # the share of the engine's flat-out rate that the traces offer
    claim_budget_s: float
    stream_tokens: int  # tokens of each request through the endpoint (section 2)
    client_requests: int
    aiperf_concurrencies: tuple[int, ...]
    aiperf_requests: int
    aiperf_input: int
    aiperf_output: int
    aiperf_warmup: int  # requests AIPerf sends first, left out of both sides' numbers
    trace_requests: int  # the Azure window (section 4)
    mooncake_first: int  # the Mooncake rows: the first warms the cache, the window is measured
    mooncake_warm: int
    mooncake_window: int
    sweep_prompt: int  # section 5's requests
    sweep_output: int
    sweep_waves: int  # requests per user in each sweep point
    sweep_batches: tuple[int, ...]


# fmt: off
SIZES["serving_endpoint"] = {
    "quick": ServingEndpointSizes(gpt_size="s", context=512, max_batch=8, block_size=16, requests=24,
        prompt_lens=(8, 48), output_lens=(8, 32), load=0.6, claim_budget_s=4.0, stream_tokens=24, client_requests=6,
        aiperf_concurrencies=(4,), aiperf_requests=32, aiperf_input=32, aiperf_output=24, aiperf_warmup=8,
        trace_requests=24,
        mooncake_first=1300, mooncake_warm=30, mooncake_window=12, sweep_prompt=16, sweep_output=64, sweep_waves=2,
        sweep_batches=(1, 2, 4, 8, 16)),
    "full": ServingEndpointSizes(gpt_size="m", context=1024, max_batch=16, block_size=16, requests=48,
        prompt_lens=(16, 128), output_lens=(16, 96), load=0.6, claim_budget_s=15.0, stream_tokens=64,
        client_requests=16, aiperf_concurrencies=(1, 4, 16), aiperf_requests=64, aiperf_input=128, aiperf_output=64,
        aiperf_warmup=16,
        trace_requests=120, mooncake_first=1220, mooncake_warm=100, mooncake_window=24, sweep_prompt=128,
        sweep_output=64, sweep_waves=3, sweep_batches=(1, 2, 4, 8, 16, 32)),
}
# fmt: on


@dataclass(frozen=True)
class MixtureOfExpertsSizes(Sizes):
    """Notebook `mixture_of_experts`'s sizes."""

    counting: dict[str, Any]
    capacity: dict[str, Any]
    model: dict[str, Any]
    distinct_batches: list[int]
    distinct_samples: int
    decode_batch: int
    expert_parallel: dict[str, Any]
    timeout_s: int


# fmt: off
SIZES["mixture_of_experts"] = {
    "quick": MixtureOfExpertsSizes(counting=dict(width=64, hidden=128, tokens=64, experts=[4, 8, 16, 32, 64]),
        capacity=dict(width=64, hidden=128, experts=16, tokens=256, factors=[1.0, 1.25, 1.5, 2.0], batches=200),
        model=dict(width=512, hidden=1024, experts=16, top_k=2), distinct_batches=[1, 2, 4, 8, 16, 32],
        distinct_samples=200, decode_batch=16, expert_parallel=dict(width=128, hidden=256, experts=8, top_k=2,
        tokens=512), timeout_s=120),
    "full": MixtureOfExpertsSizes(counting=dict(width=256, hidden=512, tokens=256, experts=[4, 8, 16, 32, 64, 128]),
        capacity=dict(width=128, hidden=256, experts=64, tokens=2048, factors=[1.0, 1.25, 1.5, 2.0], batches=400),
        model=dict(width=1024, hidden=2048, experts=32, top_k=2), distinct_batches=[1, 2, 4, 8, 16, 32, 64, 128],
        distinct_samples=400, decode_batch=32, expert_parallel=dict(width=1024, hidden=2048, experts=16, top_k=2,
        tokens=4096), timeout_s=300),
}
# fmt: on


@dataclass(frozen=True)
class OptimisationSizes(Sizes):
    """Notebook `optimisation`'s sizes."""

    n_images: int
    image_size: int
    out_size: int
    noise: float
    train: int
    hidden: int
    depth: int
    small_hidden: int
    small_depth: int
    epochs: int
    batch: int
    loader_workers: list[int]
    loader_batch: int
    loader_images: int
    repeat_fraction: float
    cache_requests: int
    gpt_size: str
    new_tokens: int
    compile: bool
    min_run_s: float
    decode_width: int
    decode_layers: int


# fmt: off
SIZES["optimisation"] = {
    "quick": OptimisationSizes(n_images=1536, image_size=96, out_size=32, noise=8.0, train=1024, hidden=1024, depth=3,
        small_hidden=256, small_depth=2, epochs=2, batch=64, loader_workers=[0, 1], loader_batch=64,
        loader_images=384, repeat_fraction=0.5, cache_requests=200, gpt_size="m", new_tokens=32, compile=False,
        min_run_s=0.1, decode_width=2048, decode_layers=4),
    "full": OptimisationSizes(n_images=8192, image_size=128, out_size=32, noise=8.0, train=6144, hidden=2048, depth=4,
        small_hidden=512, small_depth=2, epochs=3, batch=256, loader_workers=[0, 1, 2, 4, 8], loader_batch=256,
        loader_images=2048, repeat_fraction=0.5, cache_requests=2000, gpt_size="l", new_tokens=128, compile=True,
        min_run_s=0.5, decode_width=4096, decode_layers=8),
}
# fmt: on


@dataclass(frozen=True)
class FusedAttentionSizes(Sizes):
    """Notebook `fused_attention`'s sizes."""

    batch_heads: int
    head_dim: int
    block: int
    mem_tokens: list[int]
    tokens: list[int]
    softmax_shape: tuple[int, ...]


# fmt: off
SIZES["fused_attention"] = {
    "quick": FusedAttentionSizes(batch_heads=4, head_dim=64, block=256, mem_tokens=[128, 256, 512, 1024], tokens=[256,
        1024, 2048], softmax_shape=(4096, 4096)),
    "full": FusedAttentionSizes(batch_heads=8, head_dim=64, block=256, mem_tokens=[256, 512, 1024, 2048, 4096],
        tokens=[512, 2048, 4096], softmax_shape=(8192, 8192)),
}
# fmt: on


@dataclass(frozen=True)
class WhereTimeGoesSizes(Sizes):
    """Notebook `where_time_goes`'s sizes."""

    n_images: int
    image_size: int
    blur_sigma: float
    hidden: int
    depth: int
    batch: int
    steps: int
    workers: list[int]
    profile_steps: int
    sync_steps: int
    min_run_s: float


# fmt: off
SIZES["where_time_goes"] = {
    "quick": WhereTimeGoesSizes(n_images=1024, image_size=96, blur_sigma=1.5, hidden=1024, depth=3, batch=64,
        steps=12, workers=[0, 1], profile_steps=5, sync_steps=30, min_run_s=0.1),
    "full": WhereTimeGoesSizes(n_images=4096, image_size=128, blur_sigma=1.5, hidden=2048, depth=4, batch=256,
        steps=30, workers=[0, 1, 2, 4, 8], profile_steps=10, sync_steps=100, min_run_s=0.5),
}
# fmt: on


@dataclass(frozen=True)
class SharingAGpuSizes(Sizes):
    """Notebook `sharing_a_gpu`'s sizes."""

    d_in: int
    hidden: int
    depth: int
    classes: int
    max_batch: int
    max_wait_ms: float
    rate: int
    requests: int
    watch_s: float
    n_gpus: int
    inference_gpus: int
    peak_gpus: int
    trough_gpus: float
    jobs_per_hour: float
    job_gpu_hours: float
    preemption_cost_s: int
    min_run_s: float
    trainer_max_s: int


# fmt: off
SIZES["sharing_a_gpu"] = {
    "quick": SharingAGpuSizes(d_in=256, hidden=1024, depth=3, classes=10, max_batch=8, max_wait_ms=1.0, rate=1000,
        requests=300, watch_s=0.5, n_gpus=16, inference_gpus=9, peak_gpus=9, trough_gpus=1.5, jobs_per_hour=3.5,
        job_gpu_hours=7.0, preemption_cost_s=300, min_run_s=0.1, trainer_max_s=300),
    "full": SharingAGpuSizes(d_in=1024, hidden=4096, depth=4, classes=10, max_batch=32, max_wait_ms=2.0, rate=2000,
        requests=10000, watch_s=5.0, n_gpus=64, inference_gpus=36, peak_gpus=36, trough_gpus=6, jobs_per_hour=14.0,
        job_gpu_hours=7.0, preemption_cost_s=300, min_run_s=0.5, trainer_max_s=1800),
}
# fmt: on


@dataclass(frozen=True)
class EstimatingAJobSizes(Sizes):
    """Notebook `estimating_a_job`'s sizes."""

    d_in: int
    hidden: int
    depth: int
    classes: int
    batch: int
    epochs: int
    probe_sizes: list[int]
    repeats: int
    full_size: int
    small_hidden: int
    budget_gib: float
    energy_run_s: float
    energy_new_tokens: int


# fmt: off
SIZES["estimating_a_job"] = {
    "quick": EstimatingAJobSizes(d_in=256, hidden=1024, depth=3, classes=10, batch=128, epochs=2, probe_sizes=[200,
        400, 600, 800], repeats=2, full_size=8000, small_hidden=512, budget_gib=1.0, energy_run_s=0.5,
        energy_new_tokens=16),
    "full": EstimatingAJobSizes(d_in=512, hidden=4096, depth=4, classes=10, batch=512, epochs=2, probe_sizes=[5000,
        10000, 15000, 20000], repeats=2, full_size=200000, small_hidden=2048, budget_gib=16.0, energy_run_s=2.0,
        energy_new_tokens=64),
}
# fmt: on
