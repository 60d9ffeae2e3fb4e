"""Measurement on this machine: time, memory, FLOPs, ceilings, energy and profiles.

Imports core, predict. Its modules (this part is written by tools/render_docs.py):

ceilings: The machine's two ceilings (peak matmul FLOP/s and memory bandwidth) and the roofline.
energy: Energy: joules per call from the machine's power counters, or an estimate from a stated power, labelled as
    such.
flops: Counting FLOPs and arithmetic intensity.
max_batch: The largest batch that fits: double until a step does not fit, then bisect (notebook `batch_size`).
memory: Memory: measured peaks by category, and first-principles bytes per parameter.
profiling: Where the time goes: the profiler, a loop split into waiting for data and computing, Amdahl's law.
timing: Timing done right: warm-up, device sync, adaptive repeats, a record with its spread.
"""
