"""tools/gpu_acceptance.py: every notebook of the manifest, each in its GPU profile, recorded and tabled."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.lab import manifest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gpu_acceptance  # noqa: E402


def test_the_plan_is_the_manifest_in_order_with_its_gpu_profiles():
    jobs = gpu_acceptance.plan(None, None)
    assert [p.stem for p, _ in jobs] == manifest.slugs()
    assert all(p.is_file() for p, _ in jobs)
    assert [profile for _, profile in jobs] == [e.gpu_profile for e in manifest.NOTEBOOKS]
    assert dict((p.stem, prof) for p, prof in jobs)["serving_llms"] == "full"
    only = gpu_acceptance.plan("sharding, memory", "quick")
    assert [(p.stem, prof) for p, prof in only] == [("memory", "quick"), ("sharding", "quick")], "teaching order"
    for bad in ("memroy", ",", "memory,nope"):
        with pytest.raises(SystemExit, match="--only names notebooks by slug"):
            gpu_acceptance.plan(bad, None)
    with pytest.raises(ValueError, match="gpu_profile is 'quick' or 'full'"):
        manifest.Notebook("x", "t", "q", "topics", "adds", gpu_profile="medium")


def test_the_table_shows_each_verdict_and_a_missing_record():
    rows = [("memory", "full", "ok", 31.2, {"holds": 5, "undecided": 1, "contradicted": 0}),
            ("sharding", "quick", "failed (rc 1)", 3.0, None)]  # fmt: skip
    lines = gpu_acceptance.table(rows).splitlines()
    assert lines[2] == "| memory | full | ok | 31 | 5 | 1 | 0 |"
    assert lines[3] == "| sharding | quick | failed (rc 1) | 3 | - | - | - |"
    assert gpu_acceptance.device_folder("cpu") == "cpu"


@pytest.mark.processes
def test_it_runs_a_real_notebook_on_the_cpu_and_records_it(tmp_path):
    cmd = [sys.executable, str(ROOT / "tools" / "gpu_acceptance.py"), "--device", "cpu", "--profile", "quick",
           "--only", "start_here", "--results", str(tmp_path / "results"), "--logs", str(tmp_path / "logs")]  # fmt: skip
    stale = tmp_path / "results" / "start_here.json"
    stale.parent.mkdir()
    stale.write_text(json.dumps({"claims": [{"verdict": "contradicted"}]}))  # an earlier run's record
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    record = json.loads(stale.read_text())
    assert record["notebook"] == "start_here" and record["card"]["profile"] == "quick"
    counts = [sum(c["verdict"] == v for c in record["claims"]) for v in ("holds", "undecided", "contradicted")]
    assert counts[0] > 0 and counts[2] == 0, "the stale record was replaced by this run's"
    row = next(line for line in run.stdout.splitlines() if line.startswith("| start_here |"))
    assert row.startswith("| start_here | quick | ok |") and row.endswith(" | ".join(map(str, counts)) + " |")
    assert (tmp_path / "logs" / "start_here.log").read_text().count("## cell") > 5
