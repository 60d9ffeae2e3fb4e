"""labkit: the measurement plumbing shared by the AI Workload Lab notebooks.

labkit is built in floors, each a subpackage that imports only the floors below it (a test checks), lowest first:
``core`` ← ``claims``, ``predict`` ← ``instruments`` ← ``workloads`` ← ``lab``, ``parallel``, ``serving`` (the
Layout section of CONTRIBUTING.md, written from the code, lists each floor's modules and what it imports).
Most modules' docstrings name the notebooks that use them. The most used helpers are
re-exported here: ``labkit.measure``, ``labkit.count_flops``, ``labkit.peak_memory``, ...
Importing labkit changes nothing in the process; a notebook's settings are applied by one visible
call, ``lab = labkit.start("batch_size", PROFILE, DEVICE)`` (see :mod:`labkit.lab.session`).
"""

from . import claims
from .core import errors
from .core.device import choose_device, describe, sync, threads
from .core.errors import DoesNotFitError, LabError, MeasurementError
from .instruments.ceilings import (
    Roofline,
    low_precision_dtype,
    measure_copy_bandwidth,
    measure_matmul_ceiling,
    measure_roofline,
)
from .instruments.flops import (
    arithmetic_intensity,
    attention_training_flops_per_token,
    count_flops,
    count_memory_traffic,
    flops_by_operator,
    matmul_flops,
)
from .instruments.memory import MemoryRecord, peak_memory
from .instruments.timing import TimingRecord, measure, throughput
from .lab.exercises import PredictionCheck, check, check_prediction
from .lab.records import ResultLog, load_reference, machine_card
from .lab.session import Lab, start
from .lab.sizes import resolve_profile, settings
from .lab.source import show_source
from .predict.memory_model import bytes_per_parameter, state_bytes
from .predict.scaling import fit_linear, fit_power_law
from .workloads.models import build_model, count_parameters, torchvision_model

__version__ = "0.1.0"

# Loaded on first use, so that a process that only measures (a DDP worker, the background trainer) imports
# neither matplotlib nor tqdm nor ipywidgets.
_LAZY = {"plot_power_law": "lab.plots", "plot_roofline": "lab.plots", "progress": "lab.plots", "use_style": "lab.plots",
         "log_ticks": "lab.plots", "place_labels": "lab.plots", "legend_below": "lab.plots",
         "interact": "lab.widgets"}  # fmt: skip
FLOORS = ("core", "predict", "claims", "instruments", "workloads", "parallel", "serving", "lab")  # lowest first


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name in FLOORS:
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
    "legend_below",
    "load_reference",
    "log_ticks",
    "low_precision_dtype",
    "machine_card",
    "matmul_flops",
    "measure",
    "measure_copy_bandwidth",
    "measure_matmul_ceiling",
    "measure_roofline",
    "peak_memory",
    "place_labels",
    "plot_power_law",
    "plot_roofline",
    "progress",
    "resolve_profile",
    "settings",
    "show_source",
    "start",
    "state_bytes",
    "sync",
    "threads",
    "throughput",
    "torchvision_model",
    "use_style",
]
