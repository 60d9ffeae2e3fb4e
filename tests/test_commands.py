"""``python -m labkit lab | test | nb | book``: the commands the Makefile calls, defined once, that run without make
(labkit/lab/commands.py)."""

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.lab import commands, manifest, records

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _dry(capsys, *argv: str) -> list[str]:
    assert main(["--dry-run", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_bad_tier_is_refused_before_anything_runs_naming_the_allowed_ones(capsys, monkeypatch):
    monkeypatch.setattr(commands, "execute", lambda *args, **kwargs: pytest.fail("a step ran"))
    assert main(["test", "unit", "lnit"]) == 2
    err = capsys.readouterr().err
    assert "unknown tier 'lnit'; allowed: lint, unit, processes, notebooks, browser" in err


def test_a_bad_notebook_or_none_is_refused_listing_the_notebooks(capsys):
    for argv in (["nb", "batch_sise"], ["nb"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "nb needs one notebook's name" in err and ", ".join(manifest.slugs()) in err


def test_arguments_are_passed_on_only_by_lab_and_book(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["test", "unit", "--no-browser"])
    assert stop.value.code == 2 and "unrecognized arguments: --no-browser" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--dry-run", "doctor"])
    assert "--dry-run goes with lab, test, nb or book" in capsys.readouterr().err
    assert _dry(capsys, "book", "--profile", "full") == [f"{PY} tools/build_book.py --profile full"]


def test_lab_listens_on_loopback_opens_start_here_and_passes_arguments_on(capsys, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000, raising=False)
    (line,) = _dry(capsys, "lab", "--no-browser", "--port=9999")
    assert line == (
        f"{PY} -m jupyterlab --ServerApp.ip=127.0.0.1 "
        "--LabApp.default_url=/lab/tree/notebooks/start_here.ipynb --no-browser --port=9999"
    )
    monkeypatch.setattr(os, "geteuid", lambda: 0, raising=False)
    assert "--allow-root" in _dry(capsys, "lab")[0].split()
    monkeypatch.delattr(os, "geteuid", raising=False)  # Windows: no user ids, never the flag
    assert "--allow-root" not in _dry(capsys, "lab")[0].split()


def test_the_tiers_run_as_the_makefile_ran_them_each_timed(capsys):
    lines = _dry(capsys, "test")
    timer = f"{PY} tools/tier_time.py"
    assert [line.split()[-1] for line in lines if line.startswith(timer)] == [
        t for tier in commands.TIERS for t in (tier, tier)
    ]
    assert f"{PY} -m ruff check labkit tests notebooks tools" in lines
    assert f"{PY} -m ruff format --check labkit tests notebooks tools" in lines and f"{PY} -m mypy" in lines
    quick = "LABKIT_PROFILE=quick LABKIT_HEADLESS=1"
    assert f"{quick} {PY} -m pytest tests -m 'not notebooks and not browser and not processes'" in lines
    assert f"{quick} {PY} -m pytest tests -m processes" in lines and f"{PY} -m pytest tests -m browser" in lines
    nbval = next(line for line in lines if "--nbval-lax" in line)
    results = ROOT / "build" / "under-test" / "results"
    assert nbval.startswith(
        f"LABKIT_HEADLESS=1 LABKIT_AUDIT_PLOTS=1 LABKIT_CLAIMS=strict LABKIT_RESULTS_DIR={results} "
    )
    assert re.findall(r"build/under-test/(\w+)\.ipynb", nbval) == manifest.slugs()  # teaching order
    assert nbval.endswith("tests/test_notebooks.py")
    assert lines.index("remove build/under-test") < lines.index(f"{PY} tests/prepare_notebooks.py build/under-test")
    assert _dry(capsys, "test", "unit") == lines[5:8]


def test_one_notebook_runs_as_the_notebooks_tier_runs_it(capsys):
    lines = _dry(capsys, "nb", "memory")
    assert lines[:2] == [
        "remove build/under-test",
        f"{PY} tests/prepare_notebooks.py build/under-test notebooks/memory.ipynb",
    ]
    assert "build/under-test/memory.ipynb 'tests/test_notebooks.py::" in lines[2] and "[memory]" in lines[2]


def test_every_makefile_target_of_the_course_calls_the_command(root):
    makefile = (root / "Makefile").read_text()
    recipes = {m[0]: m[1] for m in re.findall(r"^([a-z]+):[^\n]*\n((?:\t[^\n]*\n)*)", makefile, re.M)}
    expected = {
        "lab": "lab $(LAB_ARGS)",
        "lint": "test lint",
        "unit": "test unit",
        "processes": "test processes",
        "notebooks": "test notebooks",
        "browser": "test browser",
        "nb": "nb $(NB)",
        "book": "book --profile $(PROFILE)",
        "doctor": "doctor",
        "report": "report --profile $(PROFILE)",
    }
    for target, command in expected.items():
        assert recipes[target] == f"\t$(BIN)/python -m labkit {command}\n", (target, recipes[target])


def test_outside_a_checkout_the_commands_that_need_one_say_so(capsys, monkeypatch):
    monkeypatch.setattr(records, "project_root", lambda: None)
    for command in ("test", "book", "nb", "lab"):
        assert main([command]) == 2
        err = capsys.readouterr().err
        assert f"python -m labkit {command} runs the course's" in err and "needs a clone of the course" in err
        assert ("notebooks/" if command == "lab" else "tools/ and tests/") in err


def test_a_missing_tool_is_named_with_how_to_install_it(capsys, monkeypatch):
    real = commands.importlib.util.find_spec
    monkeypatch.setattr(commands.importlib.util, "find_spec", lambda name: None if name == "mypy" else real(name))
    assert main(["test", "lint"]) == 2
    err = capsys.readouterr().err
    assert "lint needs mypy, which this Python" in err and '-e ".[lab,test,book]"' in err


@pytest.mark.processes
def test_a_tier_runs_times_itself_and_stops_at_a_failure(tmp_path, monkeypatch, capsys):
    """The unit tier, run for real in a stand-in checkout: its seconds recorded when it passes; a failing test's
    exit code returned, and the tier's time not recorded (as make stopped before ``tier_time.py stop``)."""
    for part in ("notebooks", "labkit", "tools", "tests", "build/under-test"):
        (tmp_path / part).mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    shutil.copy(ROOT / "tools" / "tier_time.py", tmp_path / "tools")
    (tmp_path / "tests" / "test_one.py").write_text("def test_one():\n    assert True\n")
    monkeypatch.setattr(records, "project_root", lambda: tmp_path)
    assert main(["test", "unit"]) == 0
    times = (tmp_path / "build" / "tier-times.json").read_text()
    assert '"unit"' in times and '"seconds"' in times
    (tmp_path / "tests" / "test_two.py").write_text("def test_two():\n    assert False\n")
    (tmp_path / "build" / "tier-times.json").unlink()
    assert main(["test", "unit", "browser"]) == 1  # pytest's code for a failed test; browser never starts
    assert '"seconds"' not in (tmp_path / "build" / "tier-times.json").read_text()
    assert "tier_time.py start browser" not in capsys.readouterr().out
