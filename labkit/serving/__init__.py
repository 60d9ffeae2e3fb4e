"""Answering requests: servers, loads, the LLM engine, a co-located trainer.

Imports core, workloads. Its modules (this part is written by tools/render_docs.py):

batcher: The dynamic-batching model server (notebooks `latency_throughput` and `sharing_a_gpu`): requests queue up;
    one worker thread takes the first, waits at most ``max_wait_ms`` (from that request's arrival) for more, up to
    ``max_batch``, runs the model once on the batch and answers each request.
bench: A real benchmark client against labkit's endpoint: NVIDIA AIPerf, from a virtual environment of its own.
engine: A generation server on one model: requests over time, a scheduler that batches per step, every request's
    record.
kv_cache: The KV cache in paged blocks: a block table per sequence, blocks shared by a common prefix, admission
    policies.
live: Live traffic for the generation engine: requests submitted from any thread as they come, each token streamed.
loadgen: A load generator for labkit's HTTP model server, run as its own process (notebook `latency_throughput`).
loads: MLPerf-style load scenarios for :class:`~labkit.serving.batcher.DynamicBatcher` (notebooks
    `latency_throughput` and `sharing_a_gpu`).
metrics: Serving metrics as vLLM's benchmark defines them: TTFT, TPOT, ITL, end-to-end latency and goodput under
    SLOs.
mlperf: MLPerf Inference's own LoadGen driving the dynamic batcher (notebook `latency_throughput`).
openai_api: An OpenAI-compatible HTTP endpoint in front of the live engine: ``/v1/completions``,
    ``/v1/chat/completions``.
sharing: Training and inference on one machine: a background training job, and the levers that isolate them.
speculative: Speculative decoding: a draft model proposes k tokens, the target checks them in one pass.
traces: Published LLM-serving traces, sampled: real arrivals, lengths and shared prefixes as the engine's load.
web: The HTTP front end of the dynamic-batching server, and a load generator that drives it from a second process.
"""
