"""labkit.parallel.sharding on real gloo processes: ZeRO/FSDP, tensor and pipeline parallelism, and what they hold and send."""

import time

import psutil
import pytest
import torch
import torch.distributed as dist

from labkit.claims import calls_per_block
from labkit.core import errors, procs
from labkit.parallel import distributed, sharding
from labkit.parallel.ddp_workers import WorkerContext, _rounds
from labkit.predict import memory_model

TINY = dict(
    sharding=dict(width=64, depth=2, classes=4, global_batch=16, steps=2, rounds=3),
    tensor=dict(d_model=32, head_dim=8, batch=2, tokens=8),
    pipeline=dict(width=32, layers_per_stage=1, micro_batch=4, microbatches=[2, 4], rounds=3),
)


@pytest.mark.processes
def test_the_tour_shards_exactly_computes_the_same_and_leaves_nothing_behind():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    ranks = distributed.launch(sharding.parallelism_tour, 2, backend="gloo", timeout_s=120, **TINY)
    assert distributed.running_workers() == []
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()
                and p.status() != "zombie"]  # fmt: skip
    P = ranks[0]["sharding"]["n_params"]
    assert P == 64 * 64 * 2 + 64 * 2 + 64 * 4 + 4
    for rank in ranks:
        lay = rank["sharding"]["layouts"]
        assert {k: v["losses"] for k, v in lay.items()} == {k: lay["DDP"]["losses"] for k in sharding.LAYOUTS}
        assert lay["DDP"]["resident"]["parameters"] == 4 * P and lay["DDP"]["resident"]["other"] == 4 * P  # buckets
        for kind in ("FSDP no-reshard", "ZeRO-3"):
            assert lay[kind]["resident"]["parameters"] == 4 * P / 2
            assert abs(lay[kind]["resident"]["optimizer"] - 8 * P / 2) <= 4 * 6  # Adam's 4-byte step counters
        assert lay["ZeRO-3"]["collectives"] == {"all_gather": 2 * 3, "reduce_scatter": 3}  # 3 linear layers
        assert lay["DDP"]["collectives"] == {"all_reduce": 1}
        # buffers, counted: ZeroRedundancyOptimizer all-reduces every gradient (DDP) and then broadcasts every
        # parameter from its owner; FSDP gathers the weights once (no reshard) or twice (ZeRO-3)
        assert lay["DDP"]["collective_bytes"] == {"all_reduce": 4 * P}
        assert lay["ZeRO-1"]["collective_bytes"] == {"all_reduce": 4 * P, "broadcast": 4 * P}
        assert lay["FSDP no-reshard"]["collective_bytes"] == {"all_gather": 4 * P, "reduce_scatter": 4 * P}
        assert lay["ZeRO-3"]["collective_bytes"] == {"all_gather": 8 * P, "reduce_scatter": 4 * P}
        tp = rank["tensor"]
        assert tp["MLP"]["local_params"] == (32 * 128 + 128) // 2 + 128 * 32 // 2 + 32
        assert max(tp[b]["max_error"] for b in tp) < 1e-5 and tp["attention"]["backward"] == {"all_reduce": 3}
        pipe = rank["pipeline"]
        assert set(pipe["samples"]) == {"GPipe m=2", "GPipe m=4", "1F1B m=2", "1F1B m=4", "stage alone"}
        assert pipe["activation_peak"]["1F1B"] <= pipe["activation_peak"]["GPipe"]


@pytest.mark.processes
def test_a_pipeline_needs_two_ranks_and_a_bad_layout_is_a_clear_error():
    with pytest.raises(errors.DistributedRunError, match="a pipeline needs at least 2 ranks") as failed:
        distributed.launch(sharding.pipeline_benchmark, 1, backend="gloo", timeout_s=60, width=8, layers_per_stage=1,
                           micro_batch=2, microbatches=[2])  # fmt: skip
    assert distributed.running_workers() == [] and not procs.port_in_use(failed.value.port)
    with pytest.raises(
        errors.DistributedRunError, match="exited with code 1.*must be a multiple of head_dim"
    ):  # fails mid-run
        distributed.launch(sharding.parallelism_tour, 2, backend="gloo", timeout_s=60, **dict(TINY, tensor=dict(d_model=30, head_dim=8, batch=1, tokens=4)))  # fmt: skip
    assert distributed.running_workers() == []
    with pytest.raises(ValueError, match="d_model \\(30\\) must be a multiple of head_dim \\(8\\)"):
        sharding.TPAttention(30, 8)
    with pytest.raises(ValueError, match="tensor must be a positive integer"):
        memory_model.ParallelLayout(tensor=0)


def test_worker_rounds_time_blocks_long_enough_to_measure_and_report_seconds_per_call():
    """Without given step counts, a worker times each function in blocks of about 20 ms (a collective of a
    millisecond timed a call or two at a time is mostly noise), sized as labkit.claims sizes its own blocks."""
    calls = {"instant": 0, "4 ms": 0, "50 ms": 0}

    def counted(name, seconds):
        def fn():
            calls[name] += 1
            if seconds:
                time.sleep(seconds)

        return fn

    fns = {name: counted(name, s) for name, s in (("instant", 0.0), ("4 ms", 0.004), ("50 ms", 0.05))}
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ctx = WorkerContext(rank=0, world_size=1, backend="gloo", device=torch.device("cpu"), threads=1)
        samples = _rounds(fns, ctx, rounds=3, warmup=1)
    finally:
        dist.destroy_process_group()
    per_block = {name: (n - 2) / 3 for name, n in calls.items()}  # less the warm-up call and the sizing call
    assert per_block["50 ms"] == 1 and 3 <= per_block["4 ms"] <= 5  # 20 ms / 4 ms, fewer where a sleep overruns
    assert per_block["instant"] > 100
    assert all(0.004 <= t < 0.04 for t in samples["4 ms"]) and all(t >= 0.05 for t in samples["50 ms"])
    assert [calls_per_block(t, 0.02) for t in (1e-9, 0.004, 0.05)] == [10_000, 5, 1]


def test_bytes_on_the_wire_follow_the_ring_model():
    assert sharding.bytes_on_the_wire({"all_reduce": 800}, 4) == 2 * 3 / 4 * 800
    # ZeRO-1 as ZeroRedundancyOptimizer runs it: 3 (N-1)/N x the buffer, like ZeRO-3, not DDP's 2
    assert sharding.bytes_on_the_wire({"all_reduce": 800, "broadcast": 800}, 4) == 3 * 3 / 4 * 800
    assert sharding.bytes_on_the_wire({"all_gather": 1600, "reduce_scatter": 800}, 8) == 3 * 7 / 8 * 800
    with pytest.raises(ValueError, match="collectives must be among"):
        sharding.bytes_on_the_wire({"all_to_all": 1}, 2)
    with pytest.raises(ValueError, match="on at least 2 ranks"):
        sharding.bytes_on_the_wire({"all_reduce": 1}, 1)
