"""A GPU cluster over a day, simulated with SimPy: training jobs and diurnal inference under four policies.

Taught in notebook `sharing_a_gpu`. The model is deliberately small enough to check by hand:

- **Inference** needs, in each time slot, as many GPUs as its request rate divided by one GPU's
  capacity (rounded up). The rate follows a day: low at night, a peak in the afternoon. A slot's
  GPU that is not granted *at once* misses the latency SLO for that slot's share of requests
  (a queue that starts behind only falls further behind).
- **Training** jobs arrive at random (Poisson), each needing one GPU for a given amount of work;
  they can be preempted and resumed from their last checkpoint (losing up to ``preemption_cost_s``
  of work each time), and finish when their work is done.

Policies (``POLICIES``):

- ``shared_fifo``: one queue for everything, first come first served, nothing is preempted;
- ``priority``: one pool; inference preempts training whenever it needs a GPU;
- ``static``: ``inference_gpus`` reserved for inference, the rest for training, never shared;
- ``borrow``: the same partition, but training may borrow idle inference GPUs, and gives them back
  (preempted) the moment inference needs them.

SimPy (``PreemptiveResource``, processes, interrupts) does the event scheduling; this module only
describes the workload and the policies.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field

import simpy

from ..core.result import Result

POLICIES = ("shared_fifo", "priority", "static", "borrow")
_INFERENCE, _TRAINING = 0, 1  # request priorities: lower wins
_HANDOVER_S = 1e-6  # an inference GPU is released this long before the slot ends


@dataclass(frozen=True)
class Workload:
    """One day of traffic for a cluster of ``n_gpus``. Taught in notebook `sharing_a_gpu`."""

    n_gpus: int = 16
    day_s: float = 86_400.0
    slot_s: float = 300.0  # inference demand is re-evaluated every slot
    peak_rate: float = 9_000.0  # inference requests/s at the daily peak
    trough_rate: float = 1_500.0  # at the quietest hour
    gpu_capacity: float = 1_000.0  # requests/s one GPU serves within the SLO
    jobs_per_hour: float = 2.0  # training jobs arriving (Poisson)
    job_gpu_hours: float = 3.0  # mean work per job, exponentially distributed
    preemption_cost_s: float = (
        300.0  # work redone after a preemption (since the last checkpoint), at most what was done
    )
    seed: int = 0

    def rate(self, t: float) -> float:
        """Inference requests/s at time ``t``: a cosine day, trough at midnight, peak at noon."""
        phase = (1 - math.cos(2 * math.pi * (t % self.day_s) / self.day_s)) / 2
        return self.trough_rate + (self.peak_rate - self.trough_rate) * phase

    def inference_gpus_needed(self, t: float) -> int:
        return math.ceil(self.rate(t) / self.gpu_capacity)


@dataclass
class DayResult(Result):
    """What a policy achieved over the simulated day."""

    policy: str
    utilisation: float  # busy GPU-seconds / available GPU-seconds
    slo_violation: float  # share of inference GPU-slots not served at once
    jobs_done: int
    jobs_submitted: int
    mean_completion_h: float  # arrival to finish, for jobs that finished
    training_gpu_hours: float
    preemptions: int
    wasted_gpu_hours: float  # work lost to preemptions and done again
    timeline: list[tuple[float, int, int]] = field(
        repr=False, default_factory=list
    )  # (t, inference busy, training busy)


def simulate_day(
    workload: Workload, policy: str, inference_gpus: int | None = None, jobs: list | None = None
) -> DayResult:
    """Simulate one day under ``policy``; ``inference_gpus`` sizes the partition of ``static`` and ``borrow``.

    Taught in notebook `sharing_a_gpu`.

    ``jobs`` (a list of ``(arrival_s, work_s)``) replaces the random training jobs, for tests and exercises.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")
    w = workload
    partitioned = policy in ("static", "borrow")
    if partitioned:
        if inference_gpus is None or not 0 < inference_gpus < w.n_gpus:
            raise ValueError(f"policy {policy!r} needs 0 < inference_gpus < n_gpus ({w.n_gpus}), got {inference_gpus}")
    env = simpy.Environment()
    if partitioned:
        assert inference_gpus is not None  # checked above
        inf_pool = simpy.PreemptiveResource(env, capacity=inference_gpus)
        train_pool = simpy.PreemptiveResource(env, capacity=w.n_gpus - inference_gpus)
    else:
        inf_pool = train_pool = simpy.PreemptiveResource(env, capacity=w.n_gpus)
    stats = dict(slots=0, missed=0, preemptions=0, wasted=0.0)
    busy = {"inference": 0.0, "training": 0.0}  # GPU-seconds, closed intervals
    running: dict[int, tuple[str, float]] = {}  # open intervals: id -> (kind, start)
    finished: list[float] = []
    timeline: list[tuple[float, int, int]] = []
    # In one FIFO queue, everyone has the same priority, so the queue is served in arrival order.
    inference_priority = _TRAINING if policy == "shared_fifo" else _INFERENCE

    if jobs is None:
        rng = random.Random(w.seed)
        jobs, t = [], 0.0
        while True:
            t += rng.expovariate(w.jobs_per_hour / 3600)
            if t >= w.day_s:
                break
            jobs.append((t, rng.expovariate(1 / (w.job_gpu_hours * 3600))))

    keys = itertools.count()

    def begin(kind: str) -> int:
        key = next(keys)
        running[key] = (kind, env.now)
        return key

    def end(key: int) -> None:
        kind, start = running.pop(key)
        busy[kind] += env.now - start

    def count(kind: str) -> int:
        return sum(1 for k, _ in running.values() if k == kind)

    def inference_slots(env):
        # Every slot, inference asks for the GPUs it needs; each must be granted at once.
        while True:
            for _ in range(w.inference_gpus_needed(env.now)):
                env.process(inference_gpu(env))
            yield env.timeout(w.slot_s)

    def sampler(env):
        yield env.timeout(w.slot_s / 2)  # mid-slot, when the slot's allocations have settled
        while True:
            timeline.append((env.now, count("inference"), count("training")))
            yield env.timeout(w.slot_s)

    def inference_gpu(env):
        stats["slots"] += 1
        preempt = policy in ("priority", "borrow")
        req = inf_pool.request(priority=inference_priority, preempt=preempt)
        got = yield req | env.timeout(0)
        if req not in got:
            req.cancel()
            stats["missed"] += 1
            return
        key = begin("inference")
        yield env.timeout(w.slot_s - _HANDOVER_S)  # free just before the next slot's requests arrive
        end(key)
        inf_pool.release(req)

    def training_job(env, arrival, work):
        yield env.timeout(arrival)
        remaining = work
        while remaining > 1e-9:
            pool = train_pool
            if policy == "borrow" and train_pool.count >= train_pool.capacity and inf_pool.count < inf_pool.capacity:
                pool = inf_pool  # borrow an idle inference GPU; inference takes it back when it needs it
            req = pool.request(priority=_TRAINING, preempt=False)
            try:
                yield req
            except simpy.Interrupt:  # preempted while still waiting: wait again
                req.cancel()
                continue
            key = begin("training")
            start = env.now
            try:
                yield env.timeout(remaining)
                remaining = 0.0
            except simpy.Interrupt:
                stats["preemptions"] += 1
                done = env.now - start
                lost = min(w.preemption_cost_s, done)  # progress since the last checkpoint is lost
                stats["wasted"] += lost
                remaining -= done - lost
            end(key)
            pool.release(req)
        finished.append(env.now - arrival)

    env.process(inference_slots(env))
    env.process(sampler(env))
    for arrival, work in jobs:
        env.process(training_job(env, arrival, work))
    env.run(until=w.day_s)
    for kind, start in running.values():  # still busy when the day ends: count up to the end
        busy[kind] += w.day_s - start
    return DayResult(
        policy=policy,
        utilisation=(busy["inference"] + busy["training"]) / (w.n_gpus * w.day_s),
        slo_violation=stats["missed"] / stats["slots"] if stats["slots"] else 0.0,
        jobs_done=len(finished),
        jobs_submitted=len(jobs),
        mean_completion_h=(sum(finished) / len(finished) / 3600) if finished else float("nan"),
        training_gpu_hours=busy["training"] / 3600,
        preemptions=int(stats["preemptions"]),
        wasted_gpu_hours=stats["wasted"] / 3600,
        timeline=timeline,
    )
