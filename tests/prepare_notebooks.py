"""Write the notebooks that ``make test`` runs under nbval, one per notebook, into a folder of the build.

Each is the notebook as the learner gets it (its exercises unsolved), then its exercises solved and their checkers
asserting (tests/solutions.py), then one cell that records the run: the ``PROFILE`` the kernel ended with, whether
any cell raised, what the lesson left running at its end (listening sockets other than the kernel's, child
processes), and the seconds since the kernel started, to the learner's last cell (what Restart & Run All costs
a learner, the budget's measure) and to the end of the solutions. papermill injects the quick parameters
(``PROFILE``) after each notebook's ``parameters`` cell, as it does for ``make report``; nbval then executes every
cell and compares the ``# NBVAL_CHECK_OUTPUT`` ones with their stored outputs. One run per notebook does both jobs:
the learner's path and the solutions share everything but the closing exercises.

    python tests/prepare_notebooks.py OUT_DIR [notebooks/<slug>.ipynb ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat
import papermill as pm
from solutions import with_solutions_appended

from labkit.lab import manifest

ROOT = Path(__file__).resolve().parents[1]
PARAMETERS = {"PROFILE": "quick"}
RUN_SUFFIX = ".run.json"  # the run record each prepared notebook writes beside its result record

MARK_LEARNER_END = """\
# Added by the test suite: the learner's notebook ends here; its exercises, solved, follow.
import time as _time

import psutil as _psutil


def _since_kernel_start():
    return round(_time.time() - _psutil.Process().create_time(), 2)


def _left_behind():  # what the lesson left running: sockets listening (not before it) and child processes
    me = _psutil.Process()
    ports = {c.laddr.port for c in me.net_connections("inet") if c.status == "LISTEN"} - _listening_before
    return dict(listening=sorted(ports), children=sorted(" ".join(p.cmdline()[:3]) for p in me.children(recursive=True)))


_learner_wall_s = _since_kernel_start()
_left = _left_behind()"""
MARK_LEARNER_START = """\
# Added by the test suite: what listens in this kernel before the lesson (its own sockets).
import psutil as _psutil

_listening_before = {c.laddr.port for c in _psutil.Process().net_connections("inet") if c.status == "LISTEN"}"""
RECORD_RUN = """\
# Added by the test suite: what this run was (tests/test_notebooks.py reads it).
import sys as _sys

_error = getattr(_sys, "last_value", None)  # IPython keeps the last exception a cell raised
labkit.lab.records.write_json_atomic(
    labkit.lab.records.results_dir() / "{name}{suffix}",
    dict(notebook="{name}", profile_parameter=PROFILE, error_shown=None if _error is None else repr(_error),
         learner_wall_s=_learner_wall_s, wall_s=_since_kernel_start(), references_shown=lab.references_shown,
         left_behind=_left),
)"""


def prepare(notebook: Path, out_dir: Path) -> Path:
    """Write ``out_dir / notebook.name``: the notebook, its solutions, the run record; the quick parameters in."""
    declared = {p["name"] for p in pm.inspect_notebook(str(notebook)).values()}
    missing = set(PARAMETERS) - declared
    if missing:
        raise SystemExit(
            f"{notebook.name}: its parameters cell does not set {sorted(missing)} (it sets {sorted(declared)})"
        )
    given = nbformat.read(notebook, as_version=4)
    learners_cells = len(given.cells)
    nb = with_solutions_appended(given)
    nb.cells.insert(learners_cells, nbformat.v4.new_code_cell(MARK_LEARNER_END))
    nb.cells.insert(0, nbformat.v4.new_code_cell(MARK_LEARNER_START))
    nb.cells.append(nbformat.v4.new_code_cell(RECORD_RUN.format(name=notebook.stem, suffix=RUN_SUFFIX)))
    out = out_dir / notebook.name
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / notebook.name
        nbformat.write(nb, staged)
        pm.execute_notebook(str(staged), str(out), parameters=PARAMETERS, prepare_only=True, kernel_name="python3",
                            progress_bar=False)  # fmt: skip
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    out_dir = Path(argv[0])
    notebooks = [Path(p) for p in argv[1:]] or manifest.paths(ROOT / "notebooks")
    out_dir.mkdir(parents=True, exist_ok=True)
    for notebook in notebooks:
        prepare(notebook, out_dir)
    print(f"{len(notebooks)} notebooks prepared in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
