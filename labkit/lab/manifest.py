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
        teaching_notes=(
            "put one attendee's machine card on the projector and ask the room to compare theirs: the spread of cores, "
            "memory and measured ceilings is the course's first measurement. Do section 2's timing mistakes live (no "
            "warm-up, no sync, one reading): the room sees a stopwatch disagree with itself. Every later notebook reuses "
            "the two ceilings measured here, so check that everyone's run reached its end before moving on."
        ),
    ),
    Notebook(
        slug="inference_vs_training",
        title="Inference vs fine-tuning vs training",
        question="Why is training so much more expensive than inference, and fine-tuning in between?",
        topics="FLOPs ×3, memory by category, a real training run, from one step to a whole job",
        gpu_adds="the full profile's wider model, at GPU speed",
        gpu_profile="full",
        teaching_notes=(
            "ask for the ratio of a training step's FLOPs to a forward pass's before section 2; most people guess 2, and "
            "the counter says about 3. Section 5 is where 16 bytes per parameter first appears; memory, sharding and "
            "checkpoints build on it. LoRA is the discussion point: its state is barely more than inference's, yet its "
            "step still pays for the backward pass through every layer."
        ),
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
        teaching_notes=(
            "have attendees guess each exponent before its sweep and read it off the log–log slope after. The small "
            "inputs, where a fixed cost hides the growth, are part of the lesson, not noise to be dropped. Section 5 is "
            'the learner\'s own "transcription takes minutes": ask for an extrapolation from the short clips before the '
            "notebook checks one on a longer run."
        ),
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
        teaching_notes=(
            'the line to land is "parameters decide memory, FLOPs decide work", and that papers\' FLOPs are often '
            "multiply-adds (half our count): have attendees work one row of the table by hand with 12·L·d². The "
            "depthwise-convolution comparison shows FLOPs failing to predict time for a memory-bound architecture; ask "
            "why before showing the bytes."
        ),
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
        teaching_notes=(
            'section 4 decides "will it fit?" for a billion-parameter step on fake tensors, without allocating it: ask '
            "attendees to decide first with the calculator, then run the cell. Section 2 (the CUDA context and the "
            "caching allocator) prints what it can on a CPU; on a GPU it explains the most common question in practice, "
            "why `nvidia-smi` shows more than the tensors use."
        ),
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
        teaching_notes=(
            "ask attendees to predict, from start_here's ridge point, the batch at which throughput stops rising; the "
            "largest-batch search then finds the limit without ever running out of memory. Section 6 (the noise scale: a "
            "bigger batch buys fewer steps only up to a point) is the part ML engineers most often miss, and it needs no "
            "hardware at all."
        ),
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
        teaching_notes=(
            'open with the learner\'s own "an image is rendered in seconds": every time in the notebook is steps × one '
            "pass × 2 for guidance, so attendees can predict each sweep before it runs. The weights are random; say so "
            "early, because time and memory do not depend on what a network has learnt. The "
            "5-second clip is the place to ask how many tokens a video is, and why attention, not the linear layers, "
            "decides its cost."
        ),
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
        teaching_notes=(
            'without GPUs the "GPUs" are two processes sharing the machine\'s cores, so data parallelism here is often '
            "slower than one process: the notebook explains why, and that explanation (communication against compute per "
            "rank) is the lesson. The scaling model of section 5 carries it to real GPUs and links. The failing-worker "
            "demonstration stops every process; so does interrupting a cell."
        ),
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
        teaching_notes=(
            "draw section 1's \"who holds what\" on the board before running it: DDP's 16 bytes per parameter on every GPU, "
            "down to 16/N at ZeRO-3. The pipeline's overlap claim needs a core per stage; where another program holds "
            "one, the notebook says the claim is undecided and why, which is worth pointing out as correct behaviour. "
            "Section 6 (a 70B model on 64 H200s) is a good exercise in pairs."
        ),
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
        teaching_notes=(
            "before section 4, ask the room what a resumable checkpoint must hold besides the weights (optimizer state, "
            "step, random state, data order); then the killed trainer's losses continue bit for bit. The disk section "
            "shows what the page cache hides: compare fsync'd bandwidth across attendees' laptops. An async save overlaps "
            "training only if a core is free, which the notebook measures rather than assumes. Young/Daly's interval is a "
            "short derivation for the whiteboard."
        ),
    ),
    Notebook(
        slug="latency_throughput",
        title='Latency vs throughput: two different meanings of "fast"',
        question="Fast for whom?",
        topics=(
            "MLPerf's single stream, offline and server scenarios on a real dynamic-batching server; latency "
            "against load and the M/D/1 queue; the highest rate under a p99 bound, each trial sized by LoadGen's "
            "early-stopping count and a minimum duration; MLPerf's LoadGen driving the same server, its VALID or "
            "INVALID verdicts and the cost of a Python SUT; the same server over HTTP, "
            "driven from a second process; time to first token vs time per token, predicted from bandwidth; "
            "verdicts for a live and a batch job"
        ),
        gpu_adds="far higher loads and batches; decode against HBM bandwidth",
        teaching_notes=(
            "ask attendees where latency will explode before the load sweep, from the measured service time (the M/D/1 "
            "formula of section 2). Stress that p99, not the mean, is a service's number, and that the offline throughput "
            "is an upper bound no latency target can beat. The HTTP server listens on 127.0.0.1 only."
        ),
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
            "the scheduler loop (`labkit.serving.engine.Engine.schedule`) is about 70 lines and worth reading with the class: "
            "the two schedulers differ in one line (when to admit), and pre-emption (on-demand KV memory) is "
            "one loop before admission. The SLOs are set in units of the machine's own step time, so the "
            "goodput claim means the same on a laptop and on a GPU. On a CPU speculative decoding barely pays "
            "(a pass over k+1 tokens costs 1.5 steps or more); that is the lesson's point about v, not a "
            "failure."
        ),
    ),
    Notebook(
        slug="serving_endpoint",
        title="Serving for real: an OpenAI-compatible endpoint, a benchmark client and real traffic",
        question="How is an LLM server measured at work, and does real traffic look like the textbook's?",
        topics=(
            "the engine live, on requests as they arrive, equal to its replay; an OpenAI-compatible endpoint "
            "(FastAPI, server-sent events) answered by the official openai client; NVIDIA AIPerf against it, its "
            "TTFT and ITL beside the server's own; published traces (Azure LLM inference 2023, Mooncake): "
            "burstiness against Poisson, prefix sharing and the prefill it saves; tokens/s per engine against "
            "tokens/s per user, the Pareto frontier and $ per million tokens"
        ),
        gpu_adds="a real model's step times on the same axes; many more users per engine",
        budget_s=40.0,  # AIPerf, a program of its own, takes about 5 s to start its services before its first request
        teaching_notes=(
            "the endpoint listens on 127.0.0.1 only and stops with its cell's block; ask attendees to point "
            "the openai client they use at work at it. AIPerf runs from its own virtual environment (`make "
            "aiperf` makes it once; the notebook says how where it is missing). The frontier is the slide to "
            "end on: every point is a concurrency, and choosing one is choosing between the user and the bill."
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
            "on two ranks (gloo on CPUs, NCCL on GPUs), bytes predicted and counted"
        ),
        gpu_adds="decode steps against HBM bandwidth; the all-to-all on NCCL",
        teaching_notes=(
            "start from the opening's two real models and ask whether an MoE costs like its active part or its whole; the "
            'four sections answer "both, depending on what you count" (FLOPs, memory, decode bytes, bytes between GPUs). '
            "Have attendees compute E·(1 − (1 − k/E)^B) for Mixtral at batch 4 before section 3's claims: the small-batch "
            "advantage of sparsity is the point most people miss. The expert-parallel check starts two processes, so it "
            "is the slowest cell on a busy laptop."
        ),
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
        teaching_notes=(
            "measure each optimisation alone before combining: the leaderboard is the lesson. On a CPU some tricks "
            "(dynamic int8, bf16 on cores without bf16 instructions) can be slower than float32; that is a finding about "
            "the hardware and software stack, to be reported with its configuration, not a failure. The input pipeline "
            "section usually surprises: the JPEG decoder, not the model, is the bottleneck."
        ),
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
        gpu_adds="the fused kernel PyTorch picks (cuDNN attention or FlashAttention-2) against HBM bandwidth, where the "
        "naive kernel is memory-bound",
        teaching_notes=(
            "read `attention.tiled_attention` (twenty lines) with the class before section 1: rescaling by exp(m − m′) is "
            "the whole trick of the online softmax. The memory predictions are exact to the byte; the time claims depend "
            "on where the machine's ridge point lies, so a CPU run shows fusion saving mostly memory and a GPU run mostly "
            "time. The softmax section is a good discussion of what a byte count leaves out (an exponential's cost on a "
            "CPU core)."
        ),
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
        teaching_notes=(
            "open the profiler's trace in Perfetto or chrome://tracing on the projector: it is the one artefact the "
            "notebook writes for a viewer. Do exercise 1 (60% waiting, a 5× faster GPU) before section 2, so Amdahl's law "
            "arrives before the measurement. DataLoader workers need spare cores: on a 2-core laptop the notebook "
            "predicts their speed-up from the cores it measures free."
        ),
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
        teaching_notes=(
            "two CPU cores stand in for one shared GPU: a training process runs beside the inference server and each "
            "lever (priority, partitioning) is measured against both. Where another program already holds a core, the "
            "trainer-slowdown claim is not decided and the notebook says why. Before the day-long simulation, ask which "
            "of the four policies attendees expect to keep both SLOs and utilisation."
        ),
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
        teaching_notes=(
            "the capstone: attendees estimate a workload of their own on the estimate card. The ten-times check "
            "(estimate, run, compare) is where the band's width is earned; ask for a predicted error before the run. The "
            "energy and price lines rest on stated watts and an assumed price per hour, labelled as such: have attendees "
            "put in their own electricity price or cloud rate."
        ),
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
