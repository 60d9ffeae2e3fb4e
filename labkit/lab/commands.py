"""The course's commands on any platform, make or not: ``python -m labkit lab | test | nb | book``.

The Makefile's targets call these (``make lab`` runs ``python -m labkit lab``), so each command is defined once, here,
and works the same on Windows, where there is no make. Each is a list of steps: a program run with this Python
(``sys.executable``, the virtual environment's when called as ``.venv/bin/python -m labkit``; on Windows
``.venv\\Scripts\\python -m labkit``), or a folder removed. ``--dry-run`` prints the steps instead of running them.
``test``, ``nb`` and ``book`` run the checkout's tests/ and tools/, so they need a clone of the course; ``lab`` needs
its notebooks/.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import manifest, records

TIERS = ("lint", "unit", "processes", "notebooks", "browser")
UNDER_TEST = Path("build") / "under-test"
START_URL = "/lab/tree/notebooks/start_here.ipynb"
QUICK = {"LABKIT_PROFILE": "quick", "LABKIT_HEADLESS": "1"}
# The modules each command runs, to say what to install before it starts rather than fail half-way.
NEEDS = {
    "lab": ("jupyterlab",),
    "lint": ("ruff", "mypy"),
    "unit": ("pytest",),
    "processes": ("pytest",),
    "notebooks": ("pytest", "nbval", "papermill"),
    "browser": ("pytest",),
    "book": ("sphinx", "myst_nb", "papermill"),
}


class CommandError(Exception):
    """A command that cannot run as asked: the message says what was wrong and what is allowed."""


@dataclass(frozen=True)
class Step:
    """One step of a command: run ``argv`` in the checkout with ``env`` added to the environment, or, with
    ``remove``, delete that folder of the checkout (a stale run's outputs)."""

    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    remove: Path | None = None

    def describe(self) -> str:
        """The step as a shell line (for ``--dry-run``, and echoed before it runs, as make does)."""
        if self.remove is not None:
            return f"remove {self.remove.as_posix()}"
        words = [*(f"{k}={v}" for k, v in self.env.items()), *self.argv]
        return shlex.join(words)


def checkout(command: str, needs: Sequence[str] = ("tools", "tests")) -> Path:
    """The clone of the course that ``command`` runs in; a :class:`CommandError` where there is none."""
    root = records.project_root()
    if root is not None and all((root / part).is_dir() for part in needs):
        return root
    installed = Path(__file__).resolve().parents[1]
    raise CommandError(
        f"python -m labkit {command} runs the course's {' and '.join(f'{p}/' for p in needs)}, so it needs a clone of "
        f"the course: this labkit is installed at {installed}, outside one, and the working folder {Path.cwd()} is "
        f"not inside one. Clone the course ({_repository()}) and run it there with that clone's Python."
    )


def _repository() -> str:
    """The course's repository address, as the installed package's metadata gives it (pyproject.toml's)."""
    from importlib import metadata

    try:
        urls = metadata.metadata("labkit").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        urls = []
    return next((u.split(",", 1)[1].strip() for u in urls if u.lower().startswith("repository,")), "its repository")


def _require(what: str) -> None:
    missing = [m for m in NEEDS.get(what, ()) if importlib.util.find_spec(m) is None]
    if missing:
        extra = "lab" if what == "lab" else "lab,test,book"
        raise CommandError(
            f"{what} needs {', '.join(missing)}, which this Python ({sys.executable}) lacks: install them with "
            f'python -m pip install -c constraints.txt -e ".[{extra}]" in the clone (make does it on first use)'
        )


def _is_root() -> bool:
    # elsewhere: Windows has no user id 0, and JupyterLab asks for --allow-root only on POSIX systems
    return hasattr(os, "geteuid") and os.geteuid() == 0


def lab_steps(extra: Sequence[str] = ()) -> list[Step]:
    """JupyterLab on 127.0.0.1 opening notebook `start_here`, with ``extra`` arguments passed on to it."""
    allow_root = ("--allow-root",) if _is_root() else ()  # Jupyter refuses to run as root unless told
    argv = (sys.executable, "-m", "jupyterlab", "--ServerApp.ip=127.0.0.1", f"--LabApp.default_url={START_URL}")
    return [Step((*argv, *allow_root, *extra))]


def _nbval(root: Path, targets: Sequence[str]) -> Step:
    env = {
        "LABKIT_HEADLESS": "1",
        "LABKIT_AUDIT_PLOTS": "1",
        "LABKIT_CLAIMS": "strict",
        "LABKIT_RESULTS_DIR": str(root / UNDER_TEST / "results"),
    }
    argv = (sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-cell-timeout=300", *targets)
    return Step(argv, env)


def tier_steps(tier: str, root: Path) -> list[Step]:
    """The steps of one tier of the test suite, timed by tools/tier_time.py (which the docs' table reads)."""
    if tier not in TIERS:
        raise CommandError(f"unknown tier {tier!r}; allowed: {', '.join(TIERS)} (none: all of them, in that order)")
    py = sys.executable
    folders = ("labkit", "tests", "notebooks", "tools")
    body = {
        "lint": [
            Step((py, "-m", "ruff", "check", *folders)),
            Step((py, "-m", "ruff", "format", "--check", *folders)),
            Step((py, "-m", "mypy")),
        ],
        "unit": [Step((py, "-m", "pytest", "tests", "-m", "not notebooks and not browser and not processes"), QUICK)],
        "processes": [Step((py, "-m", "pytest", "tests", "-m", "processes"), QUICK)],
        "notebooks": [
            Step(remove=UNDER_TEST),
            Step((py, "tests/prepare_notebooks.py", UNDER_TEST.as_posix())),
            _nbval(
                root, [*(f"{UNDER_TEST.as_posix()}/{s}.ipynb" for s in manifest.slugs()), "tests/test_notebooks.py"]
            ),
        ],
        "browser": [Step((py, "-m", "pytest", "tests", "-m", "browser"))],
    }[tier]
    timer = (py, "tools/tier_time.py")
    return [Step((*timer, "start", tier)), *body, Step((*timer, "stop", tier))]


def nb_steps(slug: str | None, root: Path) -> list[Step]:
    """One notebook as the notebooks tier runs it: prepared, run under nbval, its run record checked."""
    if slug not in manifest.slugs():
        raise CommandError(f"nb needs one notebook's name, got {slug!r}; one of: {', '.join(manifest.slugs())}")
    checks = (
        f"tests/test_notebooks.py::test_notebook_ran_to_its_end_with_the_quick_parameters[{slug}]",
        "tests/test_notebooks.py::test_the_run_was_quiet_enough_to_decide_the_timing_claims",
        f"tests/test_notebooks.py::test_notebook_outputs_read_clean[{slug}]",
    )
    return [
        Step(remove=UNDER_TEST),
        Step((sys.executable, "tests/prepare_notebooks.py", UNDER_TEST.as_posix(), f"notebooks/{slug}.ipynb")),
        _nbval(root, [f"{UNDER_TEST.as_posix()}/{slug}.ipynb", *checks]),
    ]


def book_steps(extra: Sequence[str] = ()) -> list[Step]:
    """tools/build_book.py with ``extra`` arguments (``--profile full``, ``--no-execute``)."""
    return [Step((sys.executable, "tools/build_book.py", *extra))]


def execute(steps: Sequence[Step], root: Path, dry_run: bool = False) -> int:
    """Run ``steps`` in ``root`` in order, echoing each; stop at the first that fails and return its exit code."""
    for step in steps:
        print(step.describe(), flush=True)
        if dry_run:
            continue
        if step.remove is not None:
            shutil.rmtree(root / step.remove, ignore_errors=True)
            continue
        proc = subprocess.Popen(step.argv, cwd=root, env={**os.environ, **step.env})
        while True:  # the child gets the same Ctrl-C as this process: wait until it has shut down, then stop
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:
                continue
        if code != 0:
            return code
    return 0


def run(command: str, args: Sequence[str], extra: Sequence[str] = (), dry_run: bool = False) -> int:
    """``python -m labkit <command>``: ``lab``, ``test [tier ...]``, ``nb <notebook>`` or ``book``; 0 if it worked.

    A bad tier, notebook or missing checkout raises :class:`CommandError` before anything runs.
    """
    if extra and command not in ("lab", "book"):
        raise CommandError(f"{command} takes no arguments {list(extra)}; only lab and book pass theirs on")
    if command == "lab":
        root = checkout(command, needs=("notebooks",))
        steps = lab_steps(extra)
        wanted: Sequence[str] = ["lab"]
    elif command == "book":
        root = checkout(command)
        steps, wanted = book_steps(extra), ["book"]
    elif command == "nb":
        root = checkout(command)
        steps, wanted = nb_steps(args[0] if args else None, root), ["notebooks"]
    elif command == "test":
        root = checkout(command)
        wanted = list(args) or list(TIERS)
        steps = [step for tier in wanted for step in tier_steps(tier, root)]
    else:
        raise CommandError(f"unknown command {command!r}; allowed: lab, test, nb, book")
    if not dry_run:
        for what in wanted:
            _require(what)
    return execute(steps, root, dry_run)
