"""Run notebooks as plain Python and keep their result records: how reference GPU results are recorded.

A GPU machine often has PyTorch but no Jupyter (``make test`` runs notebooks through papermill, nbclient and a
kernel, none of which such a machine may have). This runs each notebook's code cells in order, in one fresh
Python process per notebook, headless, with the profile and device given; prints every cell's output under a
header (and the value of a cell's last expression, as Jupyter would show it); and leaves the notebook's result
record (``labkit.ResultLog``) in ``--results``. A notebook that outlives its time is stopped with its whole
process group, and the next one runs. Timing claims are reported, not raised (a contradicted claim on a new
machine is a finding to read, not a reason to stop recording).

    python tools/record_reference.py --profile full --device cuda \\
        --results results/reference/nvidia-h200 --logs build/reference-logs notebooks/01_*.ipynb

The last lines printed are a table: notebook, outcome, seconds, and the claims' verdicts.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _display(*objects) -> None:
    """What Jupyter's ``display`` shows, as text."""
    for obj in objects:
        to_string = getattr(obj, "to_string", None)
        print(to_string() if callable(to_string) else obj)


def run_cells(notebook: Path) -> None:
    """Execute the notebook's code cells in one namespace, printing a header before each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
    namespace = {"__name__": "__main__", "display": _display}
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        first = next((line for line in source.splitlines() if line.strip()), "")
        print(f"\n## cell {i}: {first[:90]}", flush=True)
        tree = ast.parse(source, filename=f"{notebook.name}[{i}]")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        start = time.perf_counter()
        exec(compile(tree, f"{notebook.name}[{i}]", "exec"), namespace)
        if last is not None:  # run it; show its value unless a ";" ends the cell, as Jupyter does
            value = eval(compile(ast.Expression(last.value), f"{notebook.name}[{i}]", "eval"), namespace)
            if value is not None and not source.rstrip().endswith(";"):
                _display(value)
        plt.close("all")
        print(f"## cell {i} took {time.perf_counter() - start:.1f} s", flush=True)


VERDICTS = ("holds", "undecided", "contradicted")


def claim_counts(record: Path) -> dict[str, int] | None:
    """How many of a result record's claims hold, are undecided and are contradicted; None if there is no record."""
    if not record.exists():
        return None
    verdicts = [c.get("verdict") for c in json.loads(record.read_text()).get("claims", [])]
    return {v: verdicts.count(v) for v in VERDICTS}


def _claims(counts: dict[str, int] | None) -> str:
    return "no record" if counts is None else ", ".join(f"{n} {v}" for v, n in counts.items())


def _stop(proc: subprocess.Popen) -> None:
    """End a notebook's whole process group: SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=10)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def run_notebooks(jobs, device: str, results: Path, logs: Path, timeout: float, deadline: float | None = None):
    """Run each ``(notebook, profile)`` of ``jobs`` in its own process group, in order; one row each:
    ``(slug, profile, outcome, seconds, claim counts or None)``. A notebook that would start with under 10 s of
    the ``deadline`` left is not started."""
    results.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[1]
    began = time.monotonic()
    rows = []
    for nb, profile in jobs:
        limit = timeout
        if deadline is not None:
            limit = min(limit, deadline - (time.monotonic() - began))
            if limit < 10:
                rows.append((nb.stem, profile, "not started (deadline)", 0.0, None))
                continue
        env = dict(os.environ, LABKIT_PROFILE=profile, LABKIT_DEVICE=device, LABKIT_HEADLESS="1",
                   LABKIT_RESULTS_DIR=str(results.resolve()), PYTHONUNBUFFERED="1", MPLBACKEND="Agg",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))  # fmt: skip
        (results / f"{nb.stem}.json").unlink(missing_ok=True)  # a failed run must not show an earlier record
        start = time.monotonic()
        with open(logs / f"{nb.stem}.log", "w") as log:
            proc = subprocess.Popen([sys.executable, __file__, "--cell-runner", str(nb.resolve())], stdout=log,
                                    stderr=subprocess.STDOUT, env=env, cwd=nb.parent, start_new_session=True)  # fmt: skip
            try:
                outcome = "ok" if proc.wait(timeout=limit) == 0 else f"failed (rc {proc.returncode})"
            except subprocess.TimeoutExpired:
                outcome = f"stopped after {limit:.0f} s"
                _stop(proc)
            except BaseException:  # Ctrl-C: leave nothing running
                _stop(proc)
                raise
        rows.append((nb.stem, profile, outcome, time.monotonic() - start, claim_counts(results / f"{nb.stem}.json")))
        print(f"{nb.stem} ({profile}): {outcome} in {rows[-1][3]:.0f} s; claims: "
              f"{_claims(rows[-1][4])}", flush=True)  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--profile", default="full", choices=["quick", "full"])
    parser.add_argument("--device", default="cuda", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--results", type=Path, help="folder for the notebooks' result records (required)")
    parser.add_argument("--logs", type=Path, help="folder for one log per notebook (required)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one notebook may take")
    parser.add_argument("--deadline", type=float, default=None, help="seconds for all of them together")
    parser.add_argument("--cell-runner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell_runner:
        run_cells(args.notebooks[0])
        return 0
    if args.results is None or args.logs is None:
        parser.error("--results and --logs are required: where the records and the logs go")
    missing = [str(nb) for nb in args.notebooks if not nb.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    if args.timeout <= 0 or (args.deadline is not None and args.deadline <= 0):
        parser.error("--timeout and --deadline must be positive numbers of seconds")
    rows = run_notebooks([(nb, args.profile) for nb in args.notebooks], args.device, args.results, args.logs,
                         args.timeout, args.deadline)  # fmt: skip
    print("\n| notebook | outcome | seconds | claims |\n| --- | --- | --- | --- |")
    for name, _profile, outcome, secs, counts in rows:
        print(f"| {name} | {outcome} | {secs:.0f} | {_claims(counts)} |")
    return 0 if all(r[2] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
