"""Work split over processes: launcher, DDP, sharding (imports the floors below, never serving or lab).

distributed (a torchrun-style launcher and the data-parallel workers' entry point), ddp_workers (all-reduce and DDP
workers), sharding (ZeRO/FSDP, tensor- and pipeline-parallel workers).
"""
