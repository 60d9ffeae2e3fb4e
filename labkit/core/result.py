"""What every labkit result shares: ``to_dict()`` for the result log and for DataFrames, and a readable ``str``.

A result type is a dataclass that subclasses :class:`Result`; it may override either method (a timing shows its
median and spread, a memory record its breakdown). ``pd.DataFrame([r.to_dict() for r in results])`` turns a
list of any of them into a table.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import torch


def to_jsonable(obj):
    """Records, dataclasses, tensors, dtypes and numpy scalars as plain JSON values (what the result log saves).

    NaN becomes None and an infinity the string "inf" or "-inf": JSON has neither.
    """
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if isinstance(obj, torch.dtype | torch.device | Path):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if obj != obj else str(obj)
    return obj


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return f"[{len(value)} values]" if len(value) > 4 else "[" + ", ".join(map(_short, value)) + "]"
    if isinstance(value, dict) and len(value) > 4:
        return f"{{{len(value)} entries}}"
    return str(value)


class Result:
    """Base of labkit's result dataclasses (a notebook meets its subclasses: TimingRecord, MemoryRecord, ...)."""

    def to_dict(self) -> dict:
        """Every field, as plain values (nested results as dicts; tensors, devices and dtypes as strings)."""
        return {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]  # subclasses are dataclasses

    def __str__(self) -> str:
        fields = ", ".join(f"{f.name}={_short(getattr(self, f.name))}" for f in dataclasses.fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{type(self).__name__}({fields})"
