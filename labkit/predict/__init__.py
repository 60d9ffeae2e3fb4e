"""First-principles arithmetic: what a job should cost before it runs.

Imports core. Its modules (this part is written by tools/render_docs.py):

cluster: A GPU cluster over a day, simulated with SimPy: training jobs and diurnal inference under four policies.
comm_model: The data-parallel scaling model of notebook `multiple_gpus`: compute divides across GPUs, a ring all-
    reduce does not.
decoder: Real decoder models' shapes: exact parameter counts, KV-cache bytes, and how many sequences fit a GPU.
estimate: Estimating a job before running it: probe a small portion, fit, extrapolate, with an uncertainty band.
memory_model: Memory from first principles (notebooks `memory`, `batch_size`, `latency_throughput`, `checkpoints`
    and `estimating_a_job`): bytes of state per parameter for each training recipe and what a checkpoint of it
    saves, a transformer's training memory, a decoder's KV cache, and whether it fits a GPU.
pipeline: The order a pipeline stage runs its micro-batches in: GPipe's and 1F1B's, and the activations each keeps.
scaling: How cost grows with size: power laws and straight lines fitted to measured sizes.
specs: Vendor figures in one table: datasheet ceilings, GPU memory sizes, interconnect links (notebooks
    `start_here`, `memory`, `multiple_gpus`, `estimating_a_job`).
"""
