"""Measurement on this machine: time, memory, FLOPs, ceilings and profiles (imports core and predict).

timing, memory (measured peaks), max_batch (the largest batch that fits), flops (counted FLOPs and bytes),
ceilings (the roofline), profiling (loop split, Amdahl, the loader's speed-up).
"""
