"""Every environment variable labkit reads, in one table: name, meaning, allowed values, default.

Each module reads its variable through :func:`get`, which parses it the same way everywhere and fails on a typo
with a message listing what is allowed. ``python -m labkit settings`` prints the table; CONTRIBUTING.md and the
instructor guide list the same rows (a test checks they agree). One exception: ``labkit/core/procs.py`` reads
``LABKIT_PARENT`` itself, because the load generator imports it as a standard-library-only script.
"""

from __future__ import annotations

import difflib
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, what it does, the values it allows and its default."""

    name: str
    meaning: str
    allowed: str
    default: str
    parse: Callable[[str], object]  # the stripped, non-empty text -> value; raises ValueError on a bad one
    unset: object = None  # the value when the variable is unset or empty


def _choice(*options: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.lower()
        if value not in options:
            raise ValueError(f"allowed: {', '.join(options)}")
        return value

    return parse


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError("allowed: 1 (on) or 0 (off)")
    return text == "1"


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError("allowed: a whole number, 1 or more")
    return int(text)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError("allowed: a positive number of seconds")
    return value


def _folder(text: str) -> Path:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise ValueError("allowed: a folder (made if missing), and this path is an existing file")
    return path


def _device(text: str) -> str:
    value = text.lower()
    if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", value):
        raise ValueError("allowed: auto, cpu, cuda, cuda:N, mps")
    return value


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("LABKIT_PROFILE", "experiment sizes when a notebook's PROFILE is auto (make test sets quick)",
                "quick, full", "full on a CUDA GPU with 20 GiB and 20 TFLOP/s fp32, else quick", _choice("quick", "full")),
        Setting("LABKIT_DEVICE", "the device when a notebook's DEVICE is auto", "auto, cpu, cuda, cuda:N, mps",
                "auto: CUDA, then MPS, then CPU", _device, "auto"),
        Setting("LABKIT_THREADS", "PyTorch CPU threads set by labkit.start", "a whole number, 1 or more",
                "every usable core but one", _positive_int),
        Setting("LABKIT_MALLOPT", "keep freed memory in the process (glibc) for steadier CPU timings", "1, 0", "1",
                _flag, True),
        Setting("LABKIT_HEADLESS", "interactive controls run once with their defaults (tests, report)", "1, 0",
                "0", _flag, False),
        Setting("LABKIT_AUDIT_PLOTS", "every plt.show() checks units, palette, size and fonts (make test sets 1)",
                "1 (a breach fails), warn (printed), 0", "0", _choice("1", "warn", "0"), "0"),
        Setting("LABKIT_CLAIMS", "a contradicted timing claim raises (make test and make report set strict)",
                "strict", "unset: verdicts are printed only", _choice("strict")),
        Setting("LABKIT_RESULTS_DIR", "where notebooks write their result records", "a folder",
                "build/results of the checkout", _folder),
        Setting("LABKIT_PARENT", "set by labkit for its child processes: the process they must not outlive",
                "a process id", "set by labkit.core.procs.child_env", _positive_int),
        Setting("LABKIT_DIST_BACKEND", "set by labkit.parallel.distributed.launch for its workers", "gloo, nccl",
                "nccl with CUDA, else gloo", _choice("gloo", "nccl")),
        Setting("LABKIT_DIST_TIMEOUT_S", "set by labkit.parallel.distributed.launch: one collective's time limit",
                "seconds", "20", _positive_float, 20.0),
        Setting("LABKIT_REQUIRE_BROWSER", "the browser tests fail instead of skipping without Chromium (CI sets 1)",
                "1, 0", "0", _flag, False),
        Setting("LABKIT_CHROMIUM", "the Chromium binary for the browser tests", "a path",
                "chromium or chromium-browser on PATH", lambda t: t),
        Setting("LABKIT_AIPERF_VENV", "the virtual environment AIPerf runs from (labkit.serving.bench)", "a folder",
                ".venv-aiperf in the clone, else the user's cache folder", _folder),
        Setting("LABKIT_REQUIRE_AIPERF", "the AIPerf tests fail instead of skipping without its environment (CI sets 1)",
                "1, 0", "0", _flag, False),
    )
}  # fmt: skip


def get(name: str):
    """The parsed value of setting ``name`` (its default when unset or empty); a bad value raises ValueError.

    Taught in notebook `start_here`.
    """
    if name not in SETTINGS:
        raise KeyError(f"{name} is not a labkit setting; known: {', '.join(SETTINGS)}")
    setting = SETTINGS[name]
    text = os.environ.get(name, "").strip()
    if not text:
        return setting.unset
    try:
        return setting.parse(text)
    except ValueError as exc:
        raise ValueError(f"{name}={text!r} is not allowed; {exc} ({setting.meaning})") from None


PREFIX = "LABKIT_"


def check_all() -> list[str]:
    """Parse every ``LABKIT_*`` variable that is set, and warn about the ones labkit does not know.

    Called by ``labkit.start``, so a typo stops a notebook at its first cell, not minutes later when the setting
    is first read (``LABKIT_CLAIMS`` is read only when a claim is contradicted). Raises ``ValueError`` listing
    every bad value; returns the unknown names (each also warned about, with the closest known name).
    """
    problems = []
    for name in sorted(n for n in os.environ if n in SETTINGS):
        try:
            get(name)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))
    unknown = sorted(n for n in os.environ if n.startswith(PREFIX) and n not in SETTINGS)
    for name in unknown:
        close = difflib.get_close_matches(name, SETTINGS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        warnings.warn(f"{name} is not a labkit setting and is ignored; {hint}known: {', '.join(SETTINGS)}",
                      stacklevel=2)  # fmt: skip
    return unknown


def markdown_table() -> str:
    """The settings as a Markdown table (CONTRIBUTING.md and the instructor guide carry it)."""
    rows = ["| variable | what it does | allowed | default |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {s.meaning} | {s.allowed} | {s.default} |" for s in SETTINGS.values()]
    return "\n".join(rows)
