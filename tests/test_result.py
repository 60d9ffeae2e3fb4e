import dataclasses
import importlib
import json
import pkgutil

import torch

import labkit
from labkit import estimate, scaling
from labkit.result import Result

RESULT_TYPES = {
    "ceilings": ["Ceiling", "Roofline"], "batcher": ["RequestTiming"], "claims": ["Claim"], "cluster": ["DayResult"], "comm_model": ["Link"],
    "estimate": ["JobFit", "EstimateCard"], "exercises": ["PredictionCheck"], "large_batch": ["CriticalBatchFit"],
    "llm_serving": ["RequestRecord", "ServingRun", "SpeculativeResult"],
    "loads": ["LoadResult", "RateSearch"],
    "memory": ["MemoryRecord", "BatchTrial", "BatchSearch"], "memory_model": ["StateBytes"],
    "profiling": ["LoopTiming"], "scaling": ["PowerLawFit", "LinearFit"], "timing": ["TimingRecord"],
}  # fmt: skip


def test_every_result_type_shares_to_dict_and_str():
    for module, names in RESULT_TYPES.items():
        mod = importlib.import_module(f"labkit.{module}")
        for name in names:
            cls = getattr(mod, name)
            assert issubclass(cls, Result) and dataclasses.is_dataclass(cls), f"{module}.{name}"


def test_no_other_dataclass_named_like_a_result_is_left_out():
    listed = {n for names in RESULT_TYPES.values() for n in names}
    for info in pkgutil.iter_modules(labkit.__path__):
        if info.name in ("__main__", "loadgen"):
            continue
        mod = importlib.import_module(f"labkit.{info.name}")
        for name, obj in vars(mod).items():
            if (
                isinstance(obj, type)
                and obj.__module__ == mod.__name__
                and dataclasses.is_dataclass(obj)
                and name.endswith(("Record", "Result", "Fit", "Search", "Timing", "Card"))
            ):
                assert name in listed, f"labkit.{info.name}.{name} looks like a result but is not a Result"


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
