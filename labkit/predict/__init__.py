"""First-principles arithmetic: what a job should cost before it runs (imports only :mod:`labkit.core`).

specs (vendor figures: datasheet ceilings, GPU memory, links), scaling (linear and power-law fits), memory_model
(bytes of state, activations and the KV cache), comm_model (the data-parallel scaling model), estimate (probe fits
and the estimate card), cluster (the SimPy day).
"""
