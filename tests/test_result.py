import dataclasses
import importlib
import json
import pkgutil

import torch

import labkit
from labkit.core.result import Result
from labkit.predict import estimate, scaling

RESULT_NAMES = ("Record", "Result", "Fit", "Search", "Timing", "Card", "Run", "Check", "Bytes")


def _labkit_classes():
    """Every class a labkit module defines, found by walking the package (loadgen imports no torch, __main__ runs)."""
    for info in pkgutil.walk_packages(labkit.__path__, "labkit."):
        if info.name.rsplit(".", 1)[-1] in ("__main__", "loadgen"):
            continue
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if isinstance(obj, type) and obj.__module__ == mod.__name__:
                yield info.name, name, obj


CLASSES = list(_labkit_classes())


def test_every_result_type_is_a_dataclass_and_every_dataclass_named_like_a_result_is_one():
    results = {name for _, name, cls in CLASSES if issubclass(cls, Result) and cls is not Result}
    for module, name, cls in CLASSES:
        if issubclass(cls, Result) and cls is not Result:
            assert dataclasses.is_dataclass(cls), f"{module}.{name} is a Result but not a dataclass"
        elif dataclasses.is_dataclass(cls) and name.endswith(RESULT_NAMES):
            raise AssertionError(f"{module}.{name} looks like a result but is not a Result")
    # the walk finds the package's result types (a guard against a walk that finds nothing)
    assert {"Verdict", "TimingRecord", "MemoryRecord", "ServingRun", "EstimateCard", "StateBytes"} <= results


@dataclasses.dataclass
class _Inner(Result):
    seconds: float


@dataclasses.dataclass
class _Outer(Result):
    label: str
    inner: _Inner
    samples: list
    device: torch.device
    worst: float


def test_to_dict_is_plain_json_and_str_is_readable():
    r = _Outer("x", _Inner(0.0123456), [1.0] * 10, torch.device("cpu"), float("inf"))
    d = r.to_dict()
    assert d == {"label": "x", "inner": {"seconds": 0.0123456}, "samples": [1.0] * 10, "device": "cpu", "worst": "inf"}
    json.dumps(d, allow_nan=False)
    assert str(r) == "_Outer(label=x, inner=_Inner(seconds=0.01235), samples=[10 values], device=cpu, worst=inf)"


def test_real_results_serialise():
    fit = scaling.fit_power_law([1, 2, 4, 8], [1.0, 2.1, 3.9, 8.2])
    job = estimate.fit_job([100, 200, 400], [1.0, 1.9, 4.1])
    for r in (fit, job):
        json.dumps(r.to_dict(), allow_nan=False)
        assert "object at 0x" not in str(r)
