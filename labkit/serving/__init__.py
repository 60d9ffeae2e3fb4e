"""Answering requests: servers, loads, the LLM engine, a co-located trainer.

Imports core, predict, workloads. Its modules (this part is written by tools/render_docs.py):

batcher: The dynamic-batching model server (notebooks `latency_throughput` and `sharing_a_gpu`): requests queue up;
    one worker thread takes the first, waits at most ``max_wait_ms`` (from that request's arrival) for more, up to
    ``max_batch``, runs the model once on the batch and answers each request.
llm: Serving a language model: the KV cache in paged blocks, an engine that batches per step, speculative decoding.
loadgen: A load generator for labkit's HTTP model server, run as its own process (notebook `latency_throughput`).
loads: MLPerf-style load scenarios for :class:`~labkit.serving.batcher.DynamicBatcher` (notebooks
    `latency_throughput` and `sharing_a_gpu`).
sharing: Training and inference on one machine: a background training job, and the levers that isolate them.
web: The HTTP front end of the dynamic-batching server, and a load generator that drives it from a second process.
"""
