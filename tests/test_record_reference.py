"""tools/record_reference.py: notebooks run as plain Python keep their records; failures and hangs are reported."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.processes


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nbformat.write(nb, path)
    return path


def _record(tmp_path: Path, *notebooks: Path, timeout: float = 30) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "tools" / "record_reference.py"), "--profile", "quick", "--device", "cpu",
           "--results", str(tmp_path / "results"), "--logs", str(tmp_path / "logs"), "--timeout", str(timeout),
           *map(str, notebooks)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_cells_run_in_order_and_the_record_is_kept(tmp_path):
    nb = _notebook(
        tmp_path / "ok.ipynb",
        "import os, json\nfrom pathlib import Path\nout = Path(os.environ['LABKIT_RESULTS_DIR'])",
        "values = []\nvalues.append(1);",  # an expression ended by ';' still runs; its value is not shown
        "values",
        "display({'profile': os.environ['LABKIT_PROFILE'], 'headless': os.environ['LABKIT_HEADLESS']})",
        "(out / 'ok.json').write_text(json.dumps({'claims': [{'verdict': 'holds'}], 'n': len(values)}));",
    )
    run = _record(tmp_path, nb)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((tmp_path / "results" / "ok.json").read_text())["n"] == 1
    log = (tmp_path / "logs" / "ok.log").read_text()
    assert "[1]" in log and "'profile': 'quick', 'headless': '1'" in log
    assert "| ok | ok |" in run.stdout and "1 holds, 0 undecided, 0 contradicted" in run.stdout


def test_a_failing_and_a_hanging_notebook_are_reported_and_the_next_one_runs(tmp_path):
    bad = _notebook(tmp_path / "bad.ipynb", "raise RuntimeError('broken on purpose')")
    slow = _notebook(tmp_path / "slow.ipynb", "import time\ntime.sleep(60)")
    good = _notebook(tmp_path / "good.ipynb", "print('fine')")
    run = _record(tmp_path, bad, slow, good, timeout=3)
    assert run.returncode == 1
    assert "| bad | failed (rc 1) |" in run.stdout and "| slow | stopped after 3 s |" in run.stdout
    assert "| good | ok |" in run.stdout
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(slow) in " ".join(p.info["cmdline"] or [])]
    assert "broken on purpose" in (tmp_path / "logs" / "bad.log").read_text()
