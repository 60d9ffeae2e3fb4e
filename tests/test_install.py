"""The install paths: `make lab` installs the learner's environment only, `make test` adds the tool chains to it,
`TORCH=cpu` takes PyTorch's CPU-only wheels first; tools/other_python.py finds another Python or says it skipped.

The Makefile's rules are read with `make -n` (print, run nothing) into a scratch VENV, so nothing is installed."""

import os
import re
import shutil
import subprocess
import sys
import time

import other_python
import pytest
from packaging.specifiers import SpecifierSet

MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(MAKE is None, reason="GNU make is not installed")


def _make_n(root, venv, *args, touch_lab_stamp=False):
    """What `make -n` would run for `args`, with the virtual environment at `venv`."""
    if touch_lab_stamp:
        venv.mkdir(parents=True, exist_ok=True)
        stamp = venv / ".installed-lab"
        stamp.touch()
        later = time.time() + 60  # newer than pyproject.toml and constraints.txt, whatever their clocks say
        os.utime(stamp, (later, later))
    done = subprocess.run([MAKE, "-n", f"VENV={venv}", *args], cwd=root, capture_output=True, text=True)
    return done


def _pip_installs(recipe: str) -> list[str]:
    return [line for line in recipe.splitlines() if " -m pip install " in line]


@needs_make
def test_make_lab_installs_the_learners_extra_and_no_tool_chain(root, tmp_path):
    done = _make_n(root, tmp_path / "v", "lab")
    assert done.returncode == 0, done.stderr
    installs = _pip_installs(done.stdout)
    assert len(installs) == 1 and installs[0].endswith(' -e ".[lab]"'), installs
    assert "download.pytorch.org" not in done.stdout, "the default path is PyPI's torch, the tested one"


@needs_make
def test_make_test_from_nothing_installs_everything_and_after_make_lab_only_adds(root, tmp_path):
    fresh = _make_n(root, tmp_path / "fresh", "test")
    assert fresh.returncode == 0, fresh.stderr
    installs = _pip_installs(fresh.stdout)
    assert ['".[lab]"' in line for line in installs] == [True, False], installs
    assert '".[lab,test,book]"' in installs[1]
    assert "-c constraints.txt" in installs[0] and "-c constraints.txt" in installs[1]

    after_lab = _make_n(root, tmp_path / "after-lab", str(tmp_path / "after-lab" / ".installed"), touch_lab_stamp=True)
    assert after_lab.returncode == 0, after_lab.stderr
    installs = _pip_installs(after_lab.stdout)
    assert len(installs) == 1 and '".[lab,test,book]"' in installs[0], installs
    assert " -m venv " not in after_lab.stdout


@needs_make
def test_torch_cpu_installs_torch_and_torchvision_from_the_cpu_index_before_the_rest(root, tmp_path):
    done = _make_n(root, tmp_path / "v", "TORCH=cpu", "lab")
    assert done.returncode == 0, done.stderr
    installs = _pip_installs(done.stdout)
    assert len(installs) == 2, installs
    first, rest = installs
    assert "--index-url https://download.pytorch.org/whl/cpu" in first
    assert re.search(r"--no-deps -c constraints.txt .* torch torchvision$", first), first
    assert '".[lab]"' in rest and "download.pytorch.org" not in rest


def test_the_pins_accept_pytorchs_cpu_builds():
    """The CPU index's wheels are `X+cpu`; the second install keeps them only because the pin `==X` accepts a local
    version label (PEP 440's version matching), so PyPI's CUDA build is not fetched over them."""
    pins = dict(line.split("==") for line in other_python._pins())
    for name in ("torch", "torchvision"):
        assert SpecifierSet(f"=={pins[name]}").contains(f"{pins[name]}+cpu")
        assert not SpecifierSet(f"=={pins[name]}").contains(f"{pins[name]}1+cpu")


@needs_make
def test_an_unknown_torch_choice_is_refused_naming_the_choices(root, tmp_path):
    done = _make_n(root, tmp_path / "v", "TORCH=cuda", "lab")
    assert done.returncode != 0
    assert "TORCH=cuda is not a choice" in done.stderr and "TORCH=cpu" in done.stderr
    assert not (tmp_path / "v").exists()


def _fake_python(path, version: str, works: bool = True):
    path.parent.mkdir(parents=True)
    path.write_text(f"#!/bin/sh\necho {version}\n" if works else "#!/bin/sh\necho 'pyenv: not active' >&2\nexit 127\n")
    path.chmod(0o755)


@pytest.mark.skipif(os.name == "nt", reason="fakes the interpreters with shell scripts")
def test_another_python_is_found_under_pyenv_newest_patch_that_runs_first(tmp_path, monkeypatch):
    versions = tmp_path / "pyenv" / "versions"
    _fake_python(versions / "3.99.10" / "bin" / "python3.99", "3.99", works=False)  # newest, but does not run
    _fake_python(versions / "3.99.2" / "bin" / "python3.99", "3.99")
    _fake_python(versions / "3.99.1" / "bin" / "python3.99", "3.99")
    _fake_python(versions / "3.98.0" / "bin" / "python3.98", "3.98")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no python3.99, no uv
    assert other_python.candidates("3.99") == [
        str(versions / v / "bin" / "python3.99") for v in ("3.99.10", "3.99.2", "3.99.1")
    ]
    assert other_python.find_python("3.99") == str(versions / "3.99.2" / "bin" / "python3.99")
    assert other_python.find_python("3.97") is None


def test_the_tier_skips_with_one_line_and_exit_0_where_there_is_no_such_python(root, tmp_path):
    env = dict(os.environ, PYENV_ROOT=str(tmp_path / "no-pyenv"), PATH=str(tmp_path / "empty"))
    done = subprocess.run(
        [sys.executable, "tools/other_python.py", "--version", "3.99", "--no-wheels"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and done.stdout.startswith("other-python tier skipped: no Python 3.99 here")
    assert not (root / "build" / "python3.99").exists()


@pytest.mark.parametrize(
    "args, says",
    [
        (["--version", "three"], "--version 'three': give MAJOR.MINOR"),
        (["--python", "/no/such/python"], "--python /no/such/python: it does not run"),
        (["--python", sys.executable, "--version", "3.99"], "not the --version 3.99 asked for"),
        (["--wheels-only", "--no-wheels"], "leave nothing to do"),
    ],
)
def test_the_tier_refuses_bad_arguments_saying_what_is_allowed(args, says, capsys):
    with pytest.raises(SystemExit) as stopped:
        other_python.main(args)
    assert stopped.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.processes
def test_the_wheel_check_names_a_pin_without_a_wheel_for_a_target(tmp_path):
    """Against PyPI itself: NCCL ships Linux wheels only, simpy one pure-Python wheel."""
    why = other_python.pypi_reachable()
    if why is not None:
        pytest.skip(f"PyPI cannot be reached from here ({why}): the wheel check needs it")
    answers = other_python._wheels_for("3.13", "Windows amd64", ["simpy==4.1.2", "nvidia-nccl-cu13==2.30.7"], tmp_path)
    assert answers["simpy==4.1.2"] == "simpy-4.1.2-py3-none-any.whl"
    assert answers["nvidia-nccl-cu13==2.30.7"].startswith("MISSING (")
    linux = other_python._wheels_for("3.13", "manylinux x86_64", ["nvidia-nccl-cu13==2.30.7"], tmp_path)
    assert linux["nvidia-nccl-cu13==2.30.7"].endswith("_x86_64.whl")
    assert list(tmp_path.iterdir()) == [], "the reports are removed and nothing is installed"
