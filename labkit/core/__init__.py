"""The ground floor: what every other floor may use, and which imports no other floor.

Imports no other floor. Its modules (this part is written by tools/render_docs.py):

allocator: Steadier CPU timings: ask the C allocator to keep freed memory in the process (Linux, glibc).
checks: Argument checks shared by every helper a learner calls: one message shape, naming the argument and what is
    allowed.
compat: The private PyTorch internals labkit relies on, in one place, each with the public fallback or the reason.
device: Choose the device, synchronise it, and describe the hardware.
environment: Every environment variable labkit reads, in one table: name, meaning, allowed values, default.
errors: Every error labkit raises on purpose, in one place.
procs: Child processes that never outlive the notebook that started them (notebooks `multiple_gpus`,
    `latency_throughput` and `sharing_a_gpu`).
result: What every labkit result shares: ``to_dict()`` for the result log and for DataFrames, and a readable
    ``str``.
"""
