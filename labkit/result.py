"""What every labkit result shares: ``to_dict()`` for the result log and for DataFrames, and a readable ``str``.

A result type is a dataclass that subclasses :class:`Result`; it may override either method (a timing shows its
median and spread, a memory record its breakdown). ``pd.DataFrame([r.to_dict() for r in results])`` turns a
list of any of them into a table.
"""

from __future__ import annotations

import dataclasses
import math


def _plain(value):
    """A value as JSON would hold it: numbers, strings, lists and dicts; anything else by its ``str``."""
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


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
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def __str__(self) -> str:
        fields = ", ".join(f"{f.name}={_short(getattr(self, f.name))}" for f in dataclasses.fields(self) if f.repr)
        return f"{type(self).__name__}({fields})"
