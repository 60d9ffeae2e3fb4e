"""Memory: measured peaks by category, and first-principles bytes per parameter.

Taught in notebook `inference_vs_training` (what a training step holds that inference does not) and notebook `memory`.

Measurement: ``torch.distributed._tools.mem_tracker.MemTracker`` follows every tensor created
during the call and sorts it into parameters, gradients, optimizer state, activations and
temporaries; it works on CPU tensors, so the same breakdown exists on a laptop. On CUDA the
peak itself comes from the caching allocator's statistics (what the GPU really had to hold,
including temporaries MemTracker cannot see, such as library workspaces), less whatever
was already allocated before the call and not named in ``track``; MemTracker supplies the breakdown.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from ..core import checks, compat
from ..core.device import available_memory_bytes
from ..core.errors import DoesNotFitError, MeasurementError
from ..core.result import Result

CATEGORIES = ("parameters", "gradients", "optimizer", "activations", "other")

# MemTracker's reference types → our five categories. Buffers (e.g. BatchNorm statistics) are model
# state, so they count as parameters; backward temporaries (gradients of activations) and tensors
# handed in from outside (the input batch) are "other".
_CATEGORY_OF = {
    "Parameter": "parameters",
    "Buffer": "parameters",
    "Gradient": "gradients",
    "Optstate": "optimizer",
    "Activation": "activations",
    "Temp": "other",
    "Other": "other",
}


@dataclass
class MemoryRecord(Result):
    """Peak memory of one call, with the breakdown at the moment of the peak."""

    label: str
    peak_bytes: int
    by_category: dict[str, int]  # at the moment of the peak; sums to the tracked peak
    resident_by_category: dict[str, int]  # still held when the call returned (state, not transients)
    tracked_peak_bytes: int
    device: str
    source: str  # where peak_bytes came from
    extra: dict = field(default_factory=dict)

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / 2**20

    @property
    def transient_bytes(self) -> int:
        """Bytes that existed at the peak but were gone when the call returned."""
        return max(0, self.tracked_peak_bytes - sum(self.resident_by_category.values()))

    def to_dict(self) -> dict:
        return dict(
            label=self.label,
            peak_bytes=self.peak_bytes,
            peak_mib=self.peak_mib,
            by_category=dict(self.by_category),
            resident_by_category=dict(self.resident_by_category),
            tracked_peak_bytes=self.tracked_peak_bytes,
            transient_bytes=self.transient_bytes,
            device=self.device,
            source=self.source,
            **self.extra,
        )

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v / 2**20:.2f}" for k, v in self.by_category.items() if v)
        return f"{self.label}: peak {self.peak_mib:.2f} MiB ({parts} MiB) on {self.device} [{self.source}]"


def _categorise(snapshot: dict) -> dict[str, int]:
    out = dict.fromkeys(CATEGORIES, 0)
    for dev_snap in snapshot.values():
        for reftype, nbytes in dev_snap.items():
            name = getattr(reftype, "value", reftype)
            if name in _CATEGORY_OF:
                out[_CATEGORY_OF[name]] += int(nbytes)
    return out


def _flatten_trackables(objs: Iterable) -> list:
    found = []
    for obj in objs:
        if isinstance(obj, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)):
            found.append(obj)
        elif isinstance(obj, (list, tuple)):
            found.extend(_flatten_trackables(obj))
    return found


def peak_memory(
    fn: Callable,
    *args,
    track: Iterable = (),
    label: str | None = None,
    device: torch.device | str | None = None,
    **kwargs,
) -> MemoryRecord:
    """Run ``fn(*args, **kwargs)`` once and return its peak memory with a breakdown (notebook `inference_vs_training`).

    Tensors, modules and optimizers among ``args`` and in ``track`` are counted from the start,
    so weights and an optimizer's existing state are part of the peak even when ``fn`` is a
    closure. Pass the model and optimizer in ``track`` when ``fn`` uses them from outside.

    ``by_category`` has the keys ``parameters``, ``gradients``, ``optimizer``, ``activations``
    and ``other`` (input batch, backward temporaries), in bytes, at the moment of the peak.
    """
    if not callable(fn):
        raise TypeError(f"peak_memory() needs a callable, got {type(fn).__name__}")
    label = label or str(getattr(fn, "__name__", "fn"))
    trackables = _flatten_trackables([*args, *track])
    if device is None:
        device = next(
            (o.device for o in trackables if isinstance(o, torch.Tensor)),
            next((p.device for o in trackables if isinstance(o, torch.nn.Module) for p in o.parameters()), None),
        )
    device = torch.device(device) if device is not None else torch.device("cpu")

    on_cuda = device.type == "cuda"
    if on_cuda:  # the allocator counts every live tensor: free unreachable ones first (CPU tracking needs no gc)
        gc.collect()
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        baseline = torch.cuda.memory_allocated(device)

    tracker = compat.repeatable_mem_tracker()
    if trackables:
        tracker.track_external(*trackables)
        _mark_frozen_parameters(tracker, trackables)
    tracked_before = sum(_categorise(tracker.get_tracker_snapshot("current")).values())
    try:
        with tracker:
            fn(*args, **kwargs)
        if on_cuda:
            torch.cuda.synchronize(device)
    except torch.OutOfMemoryError as exc:
        _release(device)
        raise DoesNotFitError(
            f"{label!r} ran out of memory on {device} "
            f"({available_memory_bytes(device) / 2**30:.2f} GiB free after clean-up); "
            "use a smaller batch, model or sequence, a lower precision, or activation checkpointing"
        ) from exc
    except Exception as exc:
        raise MeasurementError(f"{label!r} raised {type(exc).__name__}, so no peak was measured: {exc}") from exc

    by_category = _categorise(tracker.get_tracker_snapshot("peak"))
    resident = _categorise(tracker.get_tracker_snapshot("current"))
    tracked_peak = sum(by_category.values())
    extra: dict = {}
    if on_cuda:
        # The allocator sees every tensor in the process. Memory that was already allocated before the
        # call and not named in ``track`` (other models, earlier experiments) is not this call's peak.
        allocator_peak = int(torch.cuda.max_memory_allocated(device))
        untracked_before = max(0, int(baseline) - tracked_before)
        peak = allocator_peak - untracked_before
        extra = dict(
            allocator_peak_bytes=allocator_peak,
            untracked_before_bytes=untracked_before,
            reserved_peak_bytes=int(torch.cuda.max_memory_reserved(device)),
        )
        source = (
            "CUDA caching allocator (max_memory_allocated, less untracked earlier memory); breakdown from MemTracker"
        )
    else:
        peak = tracked_peak
        source = "MemTracker (tensors tracked during the call)"
    return MemoryRecord(label, peak, by_category, resident, tracked_peak, str(device), source, extra)


class _NoHook:
    def remove(self) -> None:
        pass


def _mark_frozen_parameters(tracker, trackables: list) -> None:
    """Let MemTracker follow modules with frozen parameters (fine-tuning, notebook `inference_vs_training`).

    MemTracker registers a gradient hook on every parameter of each module that runs, and PyTorch
    refuses hooks on tensors with ``requires_grad=False``. Frozen parameters never get gradients,
    so they are marked as already hooked. This is why frozen modules must be passed in ``track``.
    """
    for obj in trackables:
        if isinstance(obj, torch.nn.Module):
            for p in obj.parameters():
                if not p.requires_grad:
                    tracker._param_to_grad_hook_handles[p] = (_NoHook(), _NoHook())


def _release(device: torch.device) -> None:
    """After a trial or an OOM on CUDA: free what cycles hold, and hand cached blocks back to the driver.

    On a CPU a trial's tensors are freed by reference counting as soon as it ends; a full ``gc.collect()``
    (about 0.2 s with torch loaded) would only slow every trial of a search.
    """
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


def ensure_fits(
    required_bytes: int,
    device: torch.device | str,
    what: str = "this experiment",
    budget_bytes: int | None = None,
) -> None:
    """Raise :class:`DoesNotFitError` before allocating if ``required_bytes`` exceed what is free.

    ``budget_bytes`` replaces the device's free memory with a budget of your choosing: notebook `memory`
    uses it to emulate a GPU's memory limit on a CPU, where a real out-of-memory would bring in the
    operating system's OOM killer instead of a catchable error.
    """
    checks.amount("required_bytes", required_bytes)
    if budget_bytes is not None:
        checks.amount("budget_bytes", budget_bytes)
    try:
        device = torch.device(device)
    except RuntimeError:
        raise ValueError(f"device must be a device name such as 'cpu' or 'cuda:0', got {device!r}") from None
    free = available_memory_bytes(device) if budget_bytes is None else budget_bytes
    where = f"{device} has" if budget_bytes is None else "the budget is"
    if required_bytes > free:
        raise DoesNotFitError(
            f"{what} needs about {required_bytes / 2**30:.2f} GiB but {where} {free / 2**30:.2f} GiB; "
            "make it smaller (batch, sequence length, model, precision) or run it where there is more memory"
        )


def predict_peak_memory(build: Callable[[], tuple[Callable, Iterable]], label: str | None = None) -> MemoryRecord:
    """Predict a step's peak memory without allocating it: build and run it on fake tensors (notebook `memory`).

    ``build()`` creates the model, optimizer and inputs and returns ``(step, track)``; it runs under
    ``FakeTensorMode``, where tensors have shapes and dtypes but no storage, so a billion-parameter
    model costs nothing. MemTracker follows the fake tensors exactly as it follows real ones, so the
    prediction equals a real run's peak on CPU (notebook `memory` checks this on a small model). It does
    not include what only a GPU adds: the CUDA context, the allocator's rounding and cache.
    """
    with compat.fake_tensor_mode():
        step, track = build()
        record = peak_memory(step, track=track, label=label or "predicted step")
    record.source = "MemTracker on fake tensors (predicted; nothing allocated)"
    return record


def serialized_bytes(model: torch.nn.Module) -> int:
    """Bytes of ``model``'s weights as saved by ``torch.save`` (notebook `optimisation` compares quantized models).

    Counting the saved file works for every weight format alike, including the tensor subclasses
    that torchao uses for int8 weights, whose storage ``Tensor.nbytes`` does not describe.
    """
    checks.module("model", model)
    import io

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell()
