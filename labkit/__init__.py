"""labkit: the measurement plumbing shared by the AI Workload Lab notebooks.

Each public helper's docstring names the notebook that teaches it. The most used ones are
re-exported here: ``labkit.measure``, ``labkit.count_flops``, ``labkit.peak_memory``, ...
"""

import logging
import os

# torch.utils.benchmark and the profiler import kineto, which logs to stderr unless told not to;
# this only works before torch is first imported.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
# torch.utils.benchmark imports cpp_extension, which warns on every CPU-only machine that it found
# no CUDA runtime; that is expected here and only confuses a learner.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)

from . import claims  # noqa: E402
from .allocator import keep_freed_memory  # noqa: E402

keep_freed_memory()  # before the first tensor is allocated: steadier CPU timings (see labkit.allocator)

from .ceilings import (  # noqa: E402
    Roofline,
    low_precision_dtype,
    measure_copy_bandwidth,
    measure_matmul_ceiling,
    measure_roofline,
)
from .device import choose_device, describe, sync  # noqa: E402
from .exercises import check  # noqa: E402
from .flops import (  # noqa: E402
    arithmetic_intensity,
    count_flops,
    count_memory_traffic,
    flops_by_operator,
    matmul_flops,
)
from .memory import (  # noqa: E402
    DoesNotFitError,
    MemoryRecord,
    bytes_per_parameter,
    peak_memory,
    state_bytes,
)
from .models import build_model, count_parameters, torchvision_model  # noqa: E402
from .plots import (  # noqa: E402
    plot_power_law,  # noqa: E402
    plot_roofline,
    progress,
    use_style,
)
from .profiles import resolve_profile, settings  # noqa: E402
from .records import ResultLog, load_reference, machine_card  # noqa: E402
from .scaling import fit_linear, fit_power_law  # noqa: E402
from .timing import MeasurementError, TimingRecord, measure, throughput  # noqa: E402
from .widgets import interact  # noqa: E402

__version__ = "0.1.0"

use_style()

__all__ = [
    "DoesNotFitError",
    "claims",
    "MeasurementError",
    "MemoryRecord",
    "ResultLog",
    "Roofline",
    "TimingRecord",
    "arithmetic_intensity",
    "build_model",
    "bytes_per_parameter",
    "check",
    "choose_device",
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
    "state_bytes",
    "sync",
    "throughput",
    "torchvision_model",
    "use_style",
]
