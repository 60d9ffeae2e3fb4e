"""The notebooks, in teaching order: one entry each, the one place that knows their order (every notebook).

A notebook is known by its **slug**, its file's name without ``.ipynb`` (``notebooks/batch_size.ipynb`` is
``batch_size``). Its position is its place in :data:`NOTEBOOKS`, and nothing else in the project records it:
the README's map, the instructor guide's tables and goals (``tools/render_docs.py``), the report's order, the
test runs and the checks that every notebook has its sizes, its answer keys and its skeleton all read it from
here. Adding a notebook is one entry here and the notebook itself (CONTRIBUTING.md says how); a test inserts a
dummy one and checks that nothing else has to change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SLUG_PATTERN = r"[a-z][a-z0-9_]*"


@dataclass(frozen=True)
class Notebook:
    """One notebook: its slug, title, question (with the topics it covers) and what a GPU adds to it."""

    slug: str
    title: str  # the notebook's heading, without the "# "
    question: str  # the everyday puzzle it answers, as the README's map puts it
    topics: str  # what it covers, in a phrase list (the map shows it in parentheses after the question)
    gpu_adds: str  # what running it on a GPU adds
    gpu_essential: bool = False  # the lesson needs a GPU (or several) to be seen in full: shown in bold
    budget_s: float = 30.0  # the quick profile's budget on 2 CPU cores, kernel start to the learner's last cell
    # the profile the GPU acceptance run (tools/gpu_acceptance.py) gives it: "full" where a full run on one GPU has
    # taken a minute or two at most, "quick" where it took longer or has not yet been timed on one
    gpu_profile: str = "quick"
    teaching_notes: str = ""  # for the instructor guide, below the notebook's goals

    def __post_init__(self) -> None:
        if not re.fullmatch(SLUG_PATTERN, self.slug):
            raise ValueError(f"a slug is lower-case letters, digits and underscores, got {self.slug!r}")
        if self.gpu_profile not in ("quick", "full"):
            raise ValueError(f"gpu_profile is 'quick' or 'full', got {self.gpu_profile!r}")

    @property
    def file(self) -> str:
        return f"{self.slug}.ipynb"


NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook(
        slug="start_here",
        title="Start here: your machine, and how to measure it",
        question="How fast is this machine, and how do I time anything without fooling myself?",
        topics="machine card, timing mistakes, FLOPs vs MACs, the two ceilings, the roofline",
        gpu_adds="its own ceilings (TFLOP/s, TB/s) beside the datasheet's",
        gpu_profile="full",
    ),
    Notebook(
        slug="inference_vs_training",
        title="Inference vs fine-tuning vs training",
        question="Why is training so much more expensive than inference, and fine-tuning in between?",
        topics="FLOPs ×3, memory by category, a real training run, from one step to a whole job",
        gpu_adds="the full profile's wider model, at GPU speed",
        gpu_profile="full",
    ),
    Notebook(
        slug="input_size",
        title="Input size: why the same model takes seconds or hours",
        question="Why does the same model take seconds or hours?",
        topics=(
            "linear in items, linear in pixels, quadratic attention, the small-demo trap, a 6-hour meeting "
            "predicted from short runs"
        ),
        gpu_adds="long sequences and large images at GPU speed",
        gpu_profile="full",
    ),
    Notebook(
        slug="model_size",
        title="Model size: bigger models do more work, but not proportionally",
        question="Is 10× the parameters 10× the time?",
        topics=(
            "a GPT family predicted exactly, utilisation rising with size, torchvision models on the "
            "roofline, parameters vs FLOPs, MACs vs FLOPs against the papers, when the small model wins"
        ),
        gpu_adds="how close the larger models get to the datasheet peak",
        gpu_profile="full",
    ),
    Notebook(
        slug="memory",
        title="Memory (VRAM): what has to fit, and what happens when it doesn't",
        question="What has to fit in memory, and what happens when it doesn't?",
        topics=(
            "bytes per parameter by recipe, measured to the byte; activations vs batch and sequence; "
            'checkpointing; a 1B-parameter step predicted on fake tensors; a "will it fit?" calculator; '
            "out-of-memory, offloading"
        ),
        gpu_adds="the CUDA context, a real out-of-memory error, offloading over PCIe",
        gpu_profile="full",
    ),
    Notebook(
        slug="batch_size",
        title="Batch size: using the hardware vs running out of memory",
        question="Why not always use a huge batch?",
        topics=(
            "throughput rising then saturating, on the roofline; memory = fixed + per sample; the largest "
            "batch that fits, found by a search that survives out-of-memory; gradient accumulation; latency "
            "vs throughput; the optimisation half: steps to a target against batch and the critical batch "
            "size, the linear learning-rate rule and warm-up, batch norm under accumulation"
        ),
        gpu_adds="saturation at far larger batches; a real out-of-memory in the search",
    ),
    Notebook(
        slug="generating_images",
        title="Generating images and video: why a picture takes seconds and a clip takes hours",
        question="Why does an image take seconds and a video clip hours?",
        topics=(
            "a diffusion transformer (DiT) counted against its paper; time = steps × pass × 2 for guidance; 50, 25 "
            "and 4 steps and what distillation buys; tokens from resolution and frames, and attention's N² "
            "term; a 5-second clip estimated; the decoder's share; one prompt or a batch; activation memory"
        ),
        gpu_adds="larger latents and longer clips, where attention dominates; bf16 on tensor cores",
    ),
    Notebook(
        slug="multiple_gpus",
        title="Multiple GPUs: why four GPUs do not take a quarter of the time",
        question="Why don't four GPUs take a quarter of the time?",
        topics=(
            "DDP on `torch.distributed`, gloo on CPU processes and NCCL on GPUs; compute vs all-reduce vs "
            "overlap; an nccl-tests-style all-reduce benchmark; a scaling model for 1–64 GPUs; when one GPU "
            "is better; failing workers stopped cleanly"
        ),
        gpu_adds="NCCL over NVLink, one process per GPU (the point of the lesson)",
        gpu_essential=True,
    ),
    Notebook(
        slug="sharding",
        title="Sharding: splitting a model that does not fit on one GPU",
        question="What if the model does not fit on one GPU?",
        topics=(
            "ZeRO stages 1–3 (PyTorch's ZeroRedundancyOptimizer and FSDP2) measured per rank against the "
            "bytes predicted; the collectives and buffers each adds, counted, and why PyTorch's ZeRO-1 moves "
            "1.5× DDP's bytes; Megatron-style tensor parallelism of an MLP and attention, checked against the "
            "unsplit layers; a two-stage pipeline with GPipe and 1F1B, its bubble and activation memory; "
            "choosing a layout for a 70B model on 64 H200s"
        ),
        gpu_adds="NCCL over NVLink, FSDP's overlap, pipeline bubbles at real micro-batch sizes",
        gpu_essential=True,
    ),
    Notebook(
        slug="checkpoints",
        title="Long training runs: checkpoints, failures and resuming",
        question="What happens when a week-long training run fails?",
        topics=(
            "a checkpoint's bytes by recipe and its time over the disk's fsync'd bandwidth, the page cache shown; "
            "torch.save, sharded DCP on two ranks, async save and its overlap with training; a trainer SIGKILLed and resumed bit for bit; torn "
            "and foreign checkpoints refused; Young's interval against a simulation; MTBF shrinking with the "
            "cluster (Llama 3's interruptions); a loader waiting for storage"
        ),
        gpu_adds="GPU-to-host copies in an async save; NCCL ranks writing their shards",
    ),
    Notebook(
        slug="latency_throughput",
        title='Latency vs throughput: two different meanings of "fast"',
        question="Fast for whom?",
        topics=(
            "MLPerf's single stream, offline and server scenarios on a real dynamic-batching server; latency "
            "against load and the M/D/1 queue; the highest rate under a p99 bound; the same server over HTTP, "
            "driven from a second process; time to first token vs time per token, predicted from bandwidth; "
            "verdicts for a live and a batch job"
        ),
        gpu_adds="far higher loads and batches; decode against HBM bandwidth",
    ),
    Notebook(
        slug="serving_llms",
        title="Serving a language model: prefill, decode, the KV cache and the scheduler",
        question="How do servers answer so many chatbot users at once?",
        topics=(
            "prefill vs decode on the roofline with the KV cache; the cache's bytes exact, and how many users "
            "fit beside Llama 2 7B and 70B on 80 and 139.8 GiB (an H200 as it reports), with and without GQA; "
            "a small engine with static vs continuous batching under Poisson arrivals, TTFT, TPOT, ITL and "
            "goodput as vLLM defines them; KV memory reserved for the whole context, for each request's own "
            "length, or allocated on demand with pre-emption; speculative decoding with its exact output and "
            "Leviathan's formula; prefix caching (TTFT against the cached share of the prefill's FLOPs) and "
            "chunked prefill (the ITL tail); MLPerf's scenarios, percentiles and LoadGen's early-stopping sample "
            "count"
        ),
        gpu_adds="decode against HBM bandwidth; why a model this small is launch-bound there",
        gpu_profile="full",
        teaching_notes=(
            "the engine (`labkit.serving.llm.Engine`) is about 100 lines and worth reading with the class: "
            "the two schedulers differ in one line (when to admit), and pre-emption (on-demand KV memory) is "
            "one loop before admission. The SLOs are set in units of the machine's own step time, so the "
            "goodput claim means the same on a laptop and on a GPU. On a CPU speculative decoding barely pays "
            "(a pass over k+1 tokens costs 1.5 steps or more); that is the lesson's point about v, not a "
            "failure."
        ),
    ),
    Notebook(
        slug="mixture_of_experts",
        title="Mixture-of-experts: many parameters, few used per token",
        question="Is a mixture-of-experts model as cheap as its active part, or as expensive as all of it?",
        topics=(
            "a top-k routed MoE layer: FLOPs per token flat and parameters linear in the experts, exact; expert "
            "capacity and dropped tokens, against a binomial; experts touched per decode step at batch B and the "
            "bytes and time that follow; Mixtral and DeepSeek-V3 decode bytes; expert parallelism's all-to-all "
            "on two gloo ranks, bytes predicted and counted"
        ),
        gpu_adds="decode steps against HBM bandwidth; the all-to-all on NCCL",
    ),
    Notebook(
        slug="optimisation",
        title="Optimisation: the same model, the same hardware, very different speed",
        question="The same model, very different speed?",
        topics=(
            "batching, bf16/fp16, int8 dynamic and weight-only with torchao, 4-bit weights for decoding (bytes per "
            "weight predicted, PyTorch's CPU int4 kernel measured), torch.compile and its break-even "
            "(full profile), each alone then combined, with quality checked against stated tolerances; a JPEG "
            "input pipeline with DataLoader workers; result and KV caches; a leaderboard that carries its "
            "software configuration"
        ),
        gpu_adds="fast bf16 and int8 kernels; pinned-memory loading",
    ),
    Notebook(
        slug="fused_attention",
        title="Fused attention: the same arithmetic, a fraction of the memory",
        question="How does FlashAttention compute attention without storing it, and when does that save time?",
        topics=(
            "naive, tiled (online softmax) and fused attention, outputs and FLOPs equal; peak memory 2·T² vs a "
            "few tiles, predicted to the byte; attention's score traffic on the roofline, its time predicted "
            "from the copy ceiling; tiling vs fusion; a fused and an unfused softmax, bytes counted"
        ),
        gpu_adds="FlashAttention-2 against HBM bandwidth, where the naive kernel is memory-bound",
    ),
    Notebook(
        slug="where_time_goes",
        title="Where the time goes",
        question="Should you buy a faster GPU?",
        topics=(
            "`torch.profiler` table and a trace for Perfetto; a deliberately slow JPEG pipeline split into "
            "waiting and computing; DataLoader workers; Amdahl's law with the measured fractions; hidden "
            "synchronisation; a checklist from profile to next action"
        ),
        gpu_adds="device time in the profile; what `.item()` really costs",
    ),
    Notebook(
        slug="sharing_a_gpu",
        title="Sharing one GPU between training and inference",
        question="Can training and inference share a GPU?",
        topics=(
            "a co-located training process vs the inference server: latency and training throughput alone and "
            "together; priority and partitioning as isolation levers, with their GPU counterparts; a SimPy "
            "cluster over a day under four policies, calibrated with the measurements"
        ),
        gpu_adds="stream priorities, MPS and MIG on a real shared GPU (explained here, not measured)",
        gpu_essential=True,
    ),
    Notebook(
        slug="estimating_a_job",
        title="Estimating a job before you run it",
        question="How long will it take, and will it fit, before you run it?",
        topics=(
            "probe runs on portions of the data, one-off vs per-sample costs, a fit with a prediction "
            "interval, an estimate card; checked on a job ten times the probes; energy from RAPL or NVML (or a "
            "stated power, labelled an estimate), kWh and dollars on the card, dollars per million tokens; a "
            "first-principles capstone for your own workload"
        ),
        gpu_adds="large one-off costs (CUDA context, compilation) that the fit must separate",
    ),
)


def slugs() -> list[str]:
    """Every notebook's slug, in teaching order."""
    return [nb.slug for nb in NOTEBOOKS]


def entry(slug: str) -> Notebook:
    """The notebook called ``slug``; an unknown name is an error that lists the known ones."""
    for nb in NOTEBOOKS:
        if nb.slug == slug:
            return nb
    raise KeyError(f"no notebook called {slug!r}; the notebooks are: {', '.join(slugs())}")


def sort_key(path: str | Path) -> tuple[int, str]:
    """Sorts notebook files in teaching order; files the manifest does not name come after, by name."""
    name = Path(path).stem
    return (slugs().index(name) if name in slugs() else len(NOTEBOOKS), name)


def paths(folder: str | Path) -> list[Path]:
    """The notebooks' files in ``folder``, in teaching order (a missing file is an error that names it)."""
    found = [Path(folder) / nb.file for nb in NOTEBOOKS]
    missing = [p.name for p in found if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{folder}: the manifest names notebooks that are not there: {', '.join(missing)}")
    return found
