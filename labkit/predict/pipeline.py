"""The order a pipeline stage runs its micro-batches in: GPipe's and 1F1B's, and the activations each keeps.

Taught in notebook `sharding`, which runs both schedules with ``torch.distributed.pipelining`` and prints
:func:`one_f_one_b`, the order torch's ``Schedule1F1B`` follows (its ``_step_microbatches``: a warm-up of
``min(m, p - s)`` forwards on stage s of p, then one backward and one forward at a time, then the remaining
backwards). A stage keeps a micro-batch's activations from its forward pass until its backward pass, so the most it
holds at once is the most forwards ahead of backwards in that order: m under GPipe, at most p under 1F1B.
"""

from __future__ import annotations

from ..core import checks


def _check(stage: int, stages: int, microbatches: int) -> None:
    checks.whole("stages", stages)
    checks.whole("microbatches", microbatches)
    if not isinstance(stage, int) or isinstance(stage, bool) or not 0 <= stage < stages:
        raise ValueError(f"stage must be a whole number from 0 to stages - 1 = {stages - 1}, got {stage!r}")


def gpipe(stage: int, stages: int, microbatches: int) -> list[str]:
    """GPipe's order on any stage: every micro-batch forward ("F0", "F1", ...), then every backward ("B0", ...).

    Taught in notebook `sharding`.
    """
    _check(stage, stages, microbatches)
    return [f"F{i}" for i in range(microbatches)] + [f"B{i}" for i in range(microbatches)]


def one_f_one_b(stage: int, stages: int, microbatches: int) -> list[str]:
    """1F1B's order on ``stage`` of ``stages``, as ``torch.distributed.pipelining.Schedule1F1B`` runs it.

    Taught in notebook `sharding`. Warm-up: the first ``min(microbatches, stages - stage)`` forwards (the last stage
    one, the first stage all p); then, until every forward is done, one backward and one forward; then the
    backwards left.
    """
    _check(stage, stages, microbatches)
    warmup = min(microbatches, stages - stage)
    order = [f"F{i}" for i in range(warmup)]
    forwards, backwards = warmup, 0
    while backwards < microbatches:
        order.append(f"B{backwards}")
        backwards += 1
        if forwards < microbatches:  # steady state: one forward for each backward
            order.append(f"F{forwards}")
            forwards += 1
    return order


def most_in_flight(order: list[str]) -> int:
    """The most micro-batches whose activations a stage holds at once: forwards run and not yet run backward.

    Taught in notebook `sharding`.
    """
    held = most = 0
    for step in order:
        held += 1 if step.startswith("F") else -1
        most = max(most, held)
    return most
