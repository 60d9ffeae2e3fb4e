"""Re-execute notebooks (quick profile) and store outputs only in `# NBVAL_CHECK_OUTPUT` cells.

nbval compares those cells' outputs with what is stored, so they must hold the output of a real
run; every other cell is committed without outputs (timings and plots differ on every machine).

    python tools/refresh_notebooks.py [notebooks/<slug>.ipynb ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat
import own_checkout  # noqa: F401  (before labkit: this checkout's labkit, or a clear stop)

# isort: split
from labkit.lab import manifest
from labkit.lab.report import run_notebook

CHECK_MARK = "# NBVAL_CHECK_OUTPUT"


def _coalesce_streams(outputs: list) -> list:
    """Join consecutive stdout chunks, so a re-run changes the file only where the text changed."""
    merged: list = []
    for out in outputs:
        if (
            out.output_type == "stream"
            and merged
            and merged[-1].output_type == "stream"
            and merged[-1].name == out.name
        ):
            merged[-1].text += out.text
        else:
            merged.append(out)
    return merged


def refresh(path: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        executed_path = Path(tmp) / path.name
        run = run_notebook(path, executed_path, profile="quick", results_dir=tmp)
        if run["status"] != "ok":
            raise SystemExit(f"{path.name}: {run['error']} (see {executed_path})")
        executed = {c.get("id"): c for c in nbformat.read(executed_path, as_version=4).cells}
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.execution_count = None
        cell.outputs = []
        if cell.source.lstrip().startswith(CHECK_MARK):
            ran = executed[cell.get("id")]
            cell.outputs = _coalesce_streams(
                [o for o in ran.outputs if not (o.output_type == "stream" and o.name == "stderr")]
            )
            cell.execution_count = ran.execution_count  # nbval only compares cells that were run
    nb.metadata.pop("papermill", None)
    nbformat.write(nb, path)
    print(f"{path.name}: refreshed in {run['wall_s']:.1f} s")


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or manifest.paths("notebooks")
    for p in paths:
        refresh(p)
