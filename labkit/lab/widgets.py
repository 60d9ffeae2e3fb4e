"""Interactive controls that also run headless (notebooks `start_here`, `inference_vs_training`, `memory`).

``labkit.interact(fn, **controls)`` is ``ipywidgets.interact`` in JupyterLab. Under the test
harness and ``make report`` (``LABKIT_HEADLESS=1``) it calls ``fn`` once with its default
arguments instead, creating no widgets: executing a cell that opens widget comms sometimes
blocks a headless notebook client until its timeout (jupyter/nbclient#312, seen here with
papermill), and a test run has nobody to move the sliders anyway. The function's code still runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ..core import environment

HEADLESS_ENV = "LABKIT_HEADLESS"


def headless() -> bool:
    """True when notebooks are being executed by the tests or the report, not by a person."""
    return environment.get(HEADLESS_ENV)


def interact(fn: Callable, **controls):
    """``ipywidgets.interact(fn, **controls)``, or ``fn()`` with its defaults when headless.

    Taught in notebook `start_here`.

    ``controls`` use ipywidgets' abbreviations: ``(min, max, step)`` for a slider, a list for a
    drop-down. Every parameter of ``fn`` needs a default: it is the control's starting value.
    """
    missing = [p.name for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty]
    if missing:
        raise TypeError(f"{fn.__name__}() needs a default for {', '.join(missing)}: it is the control's starting value")
    if headless():
        fn()
        return None
    import ipywidgets

    return ipywidgets.interact(fn, **controls)
