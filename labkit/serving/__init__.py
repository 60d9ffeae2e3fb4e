"""Answering requests: servers, loads, the LLM engine, a co-located trainer (imports the floors below, never
parallel or lab).

batcher (the dynamic-batching server), loads (MLPerf-style scenarios), web (the HTTP front end), loadgen (a load
generator in its own process; no torch), llm (a paged KV cache, an engine with static and continuous batching,
vLLM's serving metrics, speculative decoding), sharing (a background trainer, nice and affinity).
"""
