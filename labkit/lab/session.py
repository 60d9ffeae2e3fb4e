"""One visible set-up call per notebook: ``lab = labkit.start("batch_size", PROFILE, DEVICE)``.

``import labkit`` changes nothing in the process. :func:`start` is where a notebook asks for the course's
settings, each said out loud in its printed line:

- the device (:func:`~labkit.core.device.choose_device`) and the profile's sizes (:mod:`labkit.lab.sizes`);
- **PyTorch's CPU threads: all cores but one** (``LABKIT_THREADS`` overrides). A PyTorch operation splits
  its work evenly over its threads and waits for the slowest. With one thread per core, any other program
  that wakes up (a browser, a second notebook, a CI neighbour) takes a core from one of them and the whole
  operation waits for it: on a 2-core machine beside a program that keeps one core busy, whole notebooks ran
  several times slower on 2 threads than on 1. One core left free absorbs the rest of the machine. PyTorch's
  CPU performance guide gives the same advice: never run more busy threads than cores. Notebook `start_here` shows it.
- the C allocator keeps freed memory in the process (:mod:`labkit.core.allocator`; ``LABKIT_MALLOPT=0`` leaves it);
- the suite's plot style, and under ``make test`` the plot audit (``LABKIT_AUDIT_PLOTS``);
- quiet logs from the profiler's tracing library and from ``torch.utils.cpp_extension``, and no note from PyTorch
  about how torchao registers a type (:func:`_not_torchaos_enum_note`);
- tables without a column of row numbers: a pandas table whose index is only 0, 1, 2, ... is shown without it
  (:func:`_tables_without_row_numbers`);
- the machine card and the result log, named once.

Taught in notebook `start_here` (start here); every notebook starts with it.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import torch

from ..claims import Claim, Verdict, measures
from ..claims import decide as claims_decide
from ..core import environment, errors
from ..core.device import usable_cores
from .records import ResultLog

THREADS_ENV = "LABKIT_THREADS"


def _not_torchaos_enum_note(record: logging.LogRecord) -> bool:
    """False for PyTorch's log note, as torchao is imported, that torchao registers its ``KernelPreference`` enum
    the way older PyTorch releases wanted ("Calling register_constant() on Enum subclasses is deprecated"): a note
    between two libraries' versions for torchao's developers, which a learner can do nothing about and which changes
    nothing in the lesson (notebook `optimisation` imports torchao after ``labkit.start``). Other records pass."""
    return "is an Enum subclass and is now natively supported by torch.compile" not in record.getMessage()


def _row_numbers_only(frame: Any) -> bool:
    import pandas as pd

    index = frame.index
    return isinstance(index, pd.RangeIndex) and index.name is None and index.start == 0 and index.step == 1


def _tables_without_row_numbers() -> None:
    """In IPython, show a pandas DataFrame whose index is only its row numbers (an unnamed 0, 1, 2, ...) without
    that column, as HTML and as text; a table with a named or meaningful index is shown as pandas shows it.

    A results table's rows are named by its first column (a batch size, a GPU count, a claim); a column of row
    numbers beside it is one more thing to read past. Outside IPython (a script, a worker) nothing changes.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import pandas as pd

    def options() -> dict[str, Any]:
        names = {"max_rows": "max_rows", "min_rows": "min_rows", "max_cols": "max_columns"}
        return {arg: pd.get_option(f"display.{name}") for arg, name in names.items()} | {
            "show_dimensions": pd.get_option("display.show_dimensions")
        }

    def html(frame: pd.DataFrame) -> str | None:
        if not _row_numbers_only(frame):
            return frame._repr_html_()
        shown = options()
        shown.pop("min_rows")  # to_html takes no min_rows
        return frame.to_html(index=False, notebook=True, float_format=pd.get_option("display.float_format"), **shown)

    def text(frame: pd.DataFrame, printer: Any, cycle: bool) -> None:
        if not _row_numbers_only(frame):
            printer.text(repr(frame))
            return
        width = {"line_width": pd.get_option("display.width"), "max_colwidth": pd.get_option("display.max_colwidth")}
        printer.text(frame.to_string(index=False, **options(), **width))

    formatters = shell.display_formatter.formatters
    formatters["text/html"].for_type(pd.DataFrame, html)
    formatters["text/plain"].for_type(pd.DataFrame, text)


def default_threads() -> int:
    """PyTorch CPU threads for the course: ``LABKIT_THREADS`` if set, else all usable cores but one (at least 1)."""
    value = environment.get(THREADS_ENV)
    return value if value is not None else max(1, usable_cores() - 1)


@dataclass
class Lab:
    """What :func:`start` set up for one notebook: its name, device, sizes, machine card and result log.

    It also does a lesson's ceremony: :meth:`decide` decides claims with this notebook's log, device and threads,
    :meth:`record` and :meth:`headline` write to its log.
    """

    name: str
    device: torch.device
    profile: str
    cfg: Any  # the notebook's sizes: an instance of its frozen dataclass in labkit.lab.sizes
    card: dict
    log: ResultLog
    threads: int
    cores: int = field(default_factory=usable_cores)
    # The reference records the learner was shown (None until references() runs); the test suite checks that every
    # record shipped for this notebook reached the page.
    references_shown: list[str] | None = None

    @overload
    def decide(self, claims: Claim, measured: Any, **options: Any) -> Verdict: ...

    @overload
    def decide(self, claims: Sequence[Claim], measured: Any, **options: Any) -> list[Verdict]: ...

    def decide(self, claims: Claim | Sequence[Claim], measured: Any, **options: Any) -> Verdict | list[Verdict]:
        """:func:`labkit.claims.decide`, with this notebook's log, and its device and threads for variants it times.

        Taught in notebook `start_here`. ``options`` are :func:`labkit.claims.decide`'s (``timed``, ``better``,
        ``budget_s``, ...); one given here wins over the notebook's.
        """
        options.setdefault("log", self.log)
        if measures(measured):  # rounds measured before (workers, an earlier verdict) take neither
            options.setdefault("device", self.device)  # timed variants are synchronised with this device
            options.setdefault("threads", self.threads)
        return claims_decide(claims, measured, **options)

    def record(self, name: str, result: object = None, /, **values: object) -> dict:
        """Store one result in the notebook's log: a record (timing, memory, ...) and/or named values.

        Taught in notebook `start_here`.
        """
        return self.log.add(name, result, **values)

    def headline(self, **values: object) -> None:
        """Key numbers of this notebook, shown in the report's summary table. Taught in notebook `start_here`."""
        self.log.headline(**values)

    def save(self) -> Path:
        """Save the notebook's results with the machine card (``build/results/<notebook>.json``); return the path.

        Taught in notebook `start_here`.
        """
        return self.log.save()

    def references(self, describe: Callable[[dict], None]) -> list[dict]:
        """Show the reference results recorded on datacenter GPUs for this notebook, one block per GPU.

        Each block starts with the GPU's card line; then ``describe(ref)`` prints what the notebook wants to
        set beside its own numbers (``ref["summary"]`` holds the results, ``ref["card"]`` the machine).
        Returns the references (an empty list, said so, when none are recorded yet).
        """
        from .records import REFERENCE_DIRNAME, card_line, load_reference, project_root  # looked up when called

        found = load_reference(self.name)
        if not found:
            where = project_root()
            print(
                f"No reference GPU results are recorded for {self.name} in {REFERENCE_DIRNAME}/ yet: every number "
                "above is from this machine."
                if where is not None
                else f"The course's {REFERENCE_DIRNAME}/ folder was not found (open the notebook from the course's "
                "folder to see the GPU results recorded there): every number above is from this machine."
            )
        for ref in found:
            print(f"{card_line(ref['card'])}  [{ref['source_file']}]")
            describe(ref)
        self.references_shown = [ref["source_file"] for ref in found]
        return found


def start(
    name: str,
    profile: str | None = "auto",
    device: str | torch.device | None = "auto",
    *,
    dtype: str = "float32",
    threads: int | None = None,
    show: bool = True,
) -> Lab:
    """Set up notebook ``name`` (e.g. ``"batch_size"``): device, sizes, threads, style, card and log.

    Taught in notebook `start_here`.

    ``profile`` and ``device`` are the notebook's parameters ("auto" lets ``LABKIT_PROFILE`` /
    ``LABKIT_DEVICE`` decide); ``dtype`` names the number formats the notebook measures, for the card;
    ``threads`` overrides the course's CPU thread count (see the module's docstring). Prints one line
    naming the machine and the settings unless ``show=False``.
    """
    from ..core import allocator
    from ..core import device as device_mod
    from . import plot_rules, plots, records, sizes

    environment.check_all()  # every LABKIT_* setting, before it is first needed
    chosen = device_mod.choose_device(device)
    resolved, profile_note = sizes.choose_profile(profile, chosen)
    cfg = sizes.settings(name, resolved)  # an unknown notebook name fails here, before anything is changed
    n_threads = default_threads() if threads is None else threads
    if not isinstance(n_threads, int) or isinstance(n_threads, bool) or n_threads < 1:
        raise ValueError(f"threads must be a whole number, 1 or more; got {n_threads!r}")
    torch.set_num_threads(n_threads)
    allocator.keep_freed_memory()
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # the profiler's tracing library reads it when it starts
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "no CUDA runtime" on CPU machines
    logging.getLogger("torch.utils._pytree").addFilter(_not_torchaos_enum_note)  # kept once, however often
    _tables_without_row_numbers()
    plots.use_style()
    warnings.formatwarning = errors.plain_lab_warnings(warnings.formatwarning)  # labkit's own: one plain line
    if plot_rules.audit_requested():
        plot_rules.install_audit()
    card = records.machine_card(chosen, dtype=dtype, profile=resolved)
    lab = Lab(name, chosen, resolved, cfg, card, records.ResultLog(name, card), n_threads)
    if show:
        print(f"{records.card_line(card)} (of {lab.cores} cores: labkit leaves one for the rest of the machine)"
              if n_threads == lab.cores - 1 else records.card_line(card))  # fmt: skip
    if profile_note:
        print(f"profile {resolved!r}: {profile_note}")
    return lab
