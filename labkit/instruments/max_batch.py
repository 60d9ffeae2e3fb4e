"""The largest batch that fits: double until a step does not fit, then bisect (notebook `batch_size`).

Each trial runs the step under :func:`labkit.instruments.memory.peak_memory`; :mod:`labkit.instruments.memory` re-exports
:func:`find_max_batch` and its result types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from ..core.errors import DoesNotFitError
from ..core.result import Result
from .memory import _release, peak_memory


@dataclass(frozen=True)
class BatchTrial(Result):
    """One try of the batch-size search: did the step fit, and what did it need?"""

    batch: int
    fits: bool
    peak_bytes: int | None  # None when a real out-of-memory error stopped the step
    note: str = ""


@dataclass
class BatchSearch(Result):
    """The result of :func:`find_max_batch`: the limit, bracketed, and every trial that found it."""

    largest_fitting: int
    smallest_failing: int | None  # None: nothing up to ``limit`` failed
    budget_bytes: int | None
    device: str
    trials: list[BatchTrial]

    def __str__(self) -> str:
        where = f"a budget of {self.budget_bytes / 2**20:,.1f} MiB" if self.budget_bytes else f"{self.device}'s memory"
        above = f"; batch {self.smallest_failing} does not" if self.smallest_failing else " (the search's upper limit)"
        return f"largest batch that fits {where}: {self.largest_fitting}{above}; {len(self.trials)} trials"


def find_max_batch(
    step: Callable[[int], object],
    device: torch.device | str,
    budget_bytes: int | None = None,
    track: Iterable = (),
    start: int = 1,
    limit: int = 1 << 16,
) -> BatchSearch:
    """The largest batch whose step fits in memory: double until one fails, then bisect (notebook `batch_size`).

    ``step(batch)`` builds that batch's inputs and runs one step; each trial runs it under
    :func:`peak_memory` (pass the model and optimizer in ``track``). On CUDA without a budget, a real
    out-of-memory error is the failure: it is caught, the allocator's cache is emptied, and the search
    goes on, so the process stays healthy. With ``budget_bytes`` (required on CPU, where a real
    out-of-memory brings the operating system's OOM killer, not an exception) a trial fits when its
    measured peak is within the budget: an emulated device. Any other error in ``step`` stops the
    search with that error.
    """
    device = torch.device(device)
    for name, value in dict(start=start, limit=limit).items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if limit < start:
        raise ValueError(f"limit ({limit}) must be at least start ({start})")
    if budget_bytes is not None and budget_bytes <= 0:
        raise ValueError(f"budget_bytes must be positive, got {budget_bytes}")
    if budget_bytes is None and device.type != "cuda":
        raise ValueError(
            f"on {device.type} a real out-of-memory ends the process instead of raising; "
            "give budget_bytes to search against an emulated device budget"
        )
    trials: list[BatchTrial] = []
    track = list(track)

    def fits(batch: int) -> bool:
        try:
            rec = peak_memory(step, batch, track=track, label=f"batch {batch}", device=device)
        except DoesNotFitError as err:
            trials.append(BatchTrial(batch, False, None, f"out of memory: {err}"))
            return False
        finally:
            _release(device)
        ok = budget_bytes is None or rec.peak_bytes <= budget_bytes
        trials.append(BatchTrial(batch, ok, rec.peak_bytes, "" if ok else "over the budget"))
        return ok

    lo, hi, batch = None, None, start
    while batch <= limit:  # grow geometrically until something fails
        if not fits(batch):
            hi = batch
            break
        lo, batch = batch, batch * 2
    if lo is None:
        last = trials[-1]
        need = f"{last.peak_bytes / 2**20:,.1f} MiB" if last.peak_bytes else "more than is free"
        raise DoesNotFitError(
            f"even batch {start} does not fit ({need}"
            + (f" against a budget of {budget_bytes / 2**20:,.1f} MiB)" if budget_bytes else ")")
            + "; shrink the model, the sequence or the precision before tuning the batch"
        )
    if hi is None and lo < limit:
        if fits(limit):
            lo = limit
        else:
            hi = limit
    while hi is not None and hi - lo > 1:  # bisect between the last batch that fit and the first that did not
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return BatchSearch(lo, hi, budget_bytes, str(device), trials)
