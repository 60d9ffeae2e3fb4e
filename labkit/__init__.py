"""labkit: the measurement plumbing shared by the AI Workload Lab notebooks.

Most modules' docstrings name the notebooks that use them. The most used helpers are
re-exported here: ``labkit.measure``, ``labkit.count_flops``, ``labkit.peak_memory``, ...
Importing labkit changes nothing in the process; a notebook's settings are applied by one visible
call, ``lab = labkit.start("batch_size", PROFILE, DEVICE)`` (see :mod:`labkit.session`).
"""

from . import claims, errors
from .ceilings import (
    Roofline,
    low_precision_dtype,
    measure_copy_bandwidth,
    measure_matmul_ceiling,
    measure_roofline,
)
from .device import choose_device, describe, sync
from .errors import DoesNotFitError, LabError, MeasurementError
from .exercises import PredictionCheck, check, check_prediction
from .flops import (
    arithmetic_intensity,
    attention_training_flops_per_token,
    count_flops,
    count_memory_traffic,
    flops_by_operator,
    matmul_flops,
)
from .memory import (
    MemoryRecord,
    bytes_per_parameter,
    peak_memory,
    state_bytes,
)
from .models import build_model, count_parameters, torchvision_model
from .records import ResultLog, load_reference, machine_card
from .scaling import fit_linear, fit_power_law
from .session import Lab, start, threads
from .sizes import resolve_profile, settings
from .timing import TimingRecord, measure, throughput

__version__ = "0.1.0"

# Loaded on first use, so that a process that only measures (a DDP worker, the background trainer) imports
# neither matplotlib nor tqdm nor ipywidgets.
_LAZY = {"plot_power_law": "plots", "plot_roofline": "plots", "progress": "plots", "use_style": "plots",
         "interact": "widgets"}  # fmt: skip
_LAZY_MODULES = ("plots", "widgets", "report", "doctor", "cluster", "serving", "sharing", "distributed", "data",
                 "estimate", "precision", "profiling", "procs")  # fmt: skip


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'labkit' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "DoesNotFitError",
    "Lab",
    "LabError",
    "claims",
    "errors",
    "MeasurementError",
    "MemoryRecord",
    "ResultLog",
    "Roofline",
    "TimingRecord",
    "arithmetic_intensity",
    "build_model",
    "bytes_per_parameter",
    "check",
    "check_prediction",
    "PredictionCheck",
    "choose_device",
    "attention_training_flops_per_token",
    "count_flops",
    "count_memory_traffic",
    "count_parameters",
    "describe",
    "fit_linear",
    "fit_power_law",
    "flops_by_operator",
    "interact",
    "load_reference",
    "low_precision_dtype",
    "machine_card",
    "matmul_flops",
    "measure",
    "measure_copy_bandwidth",
    "measure_matmul_ceiling",
    "measure_roofline",
    "peak_memory",
    "plot_power_law",
    "plot_roofline",
    "progress",
    "resolve_profile",
    "settings",
    "start",
    "state_bytes",
    "sync",
    "threads",
    "throughput",
    "torchvision_model",
    "use_style",
]
