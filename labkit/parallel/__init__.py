"""Work split over processes: the launcher, data, expert and model parallelism, sharded checkpoints.

Imports core, claims, instruments, workloads. Its modules (this part is written by tools/render_docs.py):

ddp_workers: The functions DDP workers run for notebook `multiple_gpus` and the tests: timed all-reduces, a DDP
    training step against one process, a worker that fails on purpose.
distributed: Data parallelism on a real distributed engine: a launcher, all-reduce, DDP, and a scaling model.
expert_parallel: Expert parallelism: each rank holds some of an MoE layer's experts, and tokens travel to them
    (notebook `mixture_of_experts`).
group_check: The doctor's process-group check, run as a process of its own: can two ranks form a gloo group on
    127.0.0.1?
sharded_checkpoint: A sharded checkpoint with ``torch.distributed.checkpoint``: each rank writes its own shard
    (notebook `checkpoints`).
sharding: Beyond data parallelism, measured on real torch.distributed (notebook `sharding`): ZeRO and FSDP shard the
    training state, tensor parallelism splits each layer, pipeline parallelism splits the stack of layers.
"""
