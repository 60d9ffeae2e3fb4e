"""labkit.predict.cluster: the four policies on scenarios small enough to work out by hand."""

import pytest

from labkit.predict import cluster

HOUR = 3600.0


def tiny(n_gpus, demand_gpus, day_h=4, trough_gpus=None, **kw):
    """A cluster whose inference needs `demand_gpus` GPUs all day (or rises from `trough_gpus` at midnight)."""
    trough = demand_gpus if trough_gpus is None else trough_gpus
    return cluster.Workload(n_gpus=n_gpus, day_s=day_h * HOUR, slot_s=HOUR, peak_rate=demand_gpus * 100.0,
                            trough_rate=trough * 100.0, gpu_capacity=100.0, preemption_cost_s=0.0, **kw)  # fmt: skip


def test_static_partition_arithmetic():
    # 2 GPUs, inference holds one all day (4 h), one 1-hour job on the other: 5 of 8 GPU-hours busy.
    r = cluster.simulate_day(tiny(2, 1), "static", inference_gpus=1, jobs=[(0.0, HOUR)])
    assert r.utilisation == pytest.approx(5 / 8, abs=1e-6)
    assert r.slo_violation == 0 and r.jobs_done == 1 and r.mean_completion_h == pytest.approx(1.0)


def test_shared_fifo_lets_a_queued_job_starve_inference():
    # 1 GPU. A 2-hour job arrives at 0:30 and queues; at 1:00 the GPU passes to it (first in line), so the
    # inference slots at 1:00 and 2:00 find it busy: 2 of 4 slots missed. The job ends at 3:00.
    r = cluster.simulate_day(tiny(1, 1), "shared_fifo", jobs=[(0.5 * HOUR, 2 * HOUR)])
    assert r.slo_violation == pytest.approx(2 / 4)
    assert r.jobs_done == 1 and r.mean_completion_h == pytest.approx(2.5, abs=1e-3)


def test_priority_protects_inference_by_preempting_training():
    # The same scenario: inference takes the GPU back every slot, so the job never gets a full slot.
    r = cluster.simulate_day(tiny(1, 1), "priority", jobs=[(0.5 * HOUR, 2 * HOUR)])
    assert r.slo_violation == 0
    assert r.preemptions >= 2 and r.jobs_done == 0


def test_borrowing_idle_inference_gpus_finishes_training_sooner_without_missing_inference():
    # 2 GPUs, 1 reserved for inference, which needs nothing at midnight and one GPU later.
    # Two 0.9-hour jobs at midnight: static runs them one after the other, borrow runs them side by side.
    w = tiny(2, 1, trough_gpus=0)
    jobs = [(0.0, 0.9 * HOUR), (0.0, 0.9 * HOUR)]
    static = cluster.simulate_day(w, "static", inference_gpus=1, jobs=jobs)
    borrow = cluster.simulate_day(w, "borrow", inference_gpus=1, jobs=jobs)
    assert static.mean_completion_h == pytest.approx((0.9 + 1.8) / 2, abs=1e-3)
    assert borrow.mean_completion_h == pytest.approx(0.9, abs=1e-3)
    assert static.slo_violation == borrow.slo_violation == 0
    assert borrow.utilisation == pytest.approx(static.utilisation, abs=1e-6)  # the same work, done sooner


def test_preemption_loses_work_since_the_last_checkpoint():
    w = cluster.Workload(n_gpus=1, day_s=4 * HOUR, slot_s=HOUR, peak_rate=100.0, trough_rate=0.0, gpu_capacity=100.0,
                         preemption_cost_s=600.0)  # fmt: skip
    # Free GPU until 1:00 (no inference at midnight), then inference takes it back every slot: the job runs an
    # hour, is preempted and loses the 10 minutes since its last checkpoint; later it only gets instants.
    r = cluster.simulate_day(w, "priority", jobs=[(0.0, 3 * HOUR)])
    assert r.preemptions >= 1 and r.jobs_done == 0
    assert r.wasted_gpu_hours == pytest.approx(600 / HOUR, abs=1e-6)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="unknown policy 'round_robin'; allowed: shared_fifo"):
        cluster.simulate_day(tiny(2, 1), "round_robin")
    with pytest.raises(ValueError, match="needs 0 < inference_gpus < n_gpus"):
        cluster.simulate_day(tiny(2, 1), "static")


def test_a_realistic_day_favours_borrowing_over_static_partitions():
    w = cluster.Workload(jobs_per_hour=3.5)
    static = cluster.simulate_day(w, "static", inference_gpus=9)
    borrow = cluster.simulate_day(w, "borrow", inference_gpus=9)
    fifo = cluster.simulate_day(w, "shared_fifo")
    assert borrow.utilisation > static.utilisation and borrow.slo_violation <= static.slo_violation
    assert fifo.slo_violation > 0.01
