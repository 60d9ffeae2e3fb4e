"""The suite on another Python: the unit tier and two notebooks on Python 3.13 (or one asked for), and a check that
every pin in constraints.txt has a wheel for CPython 3.12 and 3.13 on Linux, macOS and Windows.

``make other-python`` (``.ci/run`` runs it after ``make test``) calls this. It finds the interpreter on PATH
(``python3.13``), under pyenv's root or among uv's managed Pythons; where there is none it prints one line saying
so and exits 0, since a machine without that Python cannot test it. Otherwise it builds its own virtual environment
under ``build/python3.13/`` (the pins of constraints.txt, ``.[lab,test]``; reused while pyproject.toml and
constraints.txt are unchanged), runs the unit tier as ``make unit`` does and two notebooks as ``make nb`` does
(tests/prepare_notebooks.py, then nbval in that environment's own kernel), and checks that their records name the
interpreter. The wheel check asks pip, for each of the six targets, which file it would install for every pin
(``pip install --dry-run --only-binary=:all: --platform ... --python-version ...``: PyPI's metadata, no wheel
downloaded); it runs beside the install and is skipped with a line saying so where PyPI cannot be reached.

    python tools/other_python.py                      # 3.13: wheel check, environment, unit tier, two notebooks
    python tools/other_python.py --version 3.12
    python tools/other_python.py --python /usr/local/bin/python3.13
    python tools/other_python.py --wheels-only        # only the wheel check

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ("start_here", "multiple_gpus")  # the first lesson, and one whose workers are processes (torch.distributed)
UNIT_MARKERS = "not notebooks and not browser and not processes"  # the unit tier, as the Makefile's `unit` runs it
PYPI = "https://pypi.org/simple"
# The targets a learner brings: Linux on x86 (manylinux 2.28, what PyTorch's wheels need, and every older manylinux
# a wheel may be tagged with), a Mac with Apple silicon (macOS 14, pip accepts wheels for older versions too),
# Windows on x86.
PLATFORMS = {
    "manylinux x86_64": [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)]
    + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"],
    "macOS arm64": ["macosx_14_0_arm64"],
    "Windows amd64": ["win_amd64"],
}
WHEEL_PYTHONS = ("3.12", "3.13")


def _version_of(python: str) -> str | None:
    """'3.13' for an interpreter that runs, None for one that does not (a pyenv shim of an inactive version)."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _pyenv_root() -> Path | None:
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    pyenv = shutil.which("pyenv")
    if pyenv:
        done = subprocess.run([pyenv, "root"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    home = Path.home() / ".pyenv"
    return home if home.is_dir() else None


def _patch(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.parent.parent.name)[:3])


def candidates(version: str) -> list[str]:
    """Where a Python `version` may be, in the order tried: PATH, pyenv's versions (newest patch first), uv's."""
    found = []
    on_path = shutil.which(f"python{version}")
    if on_path:
        found.append(on_path)
    root = _pyenv_root()
    if root is not None:
        pattern = f"{version}.*/bin/python{version}"
        found += [str(p) for p in sorted((root / "versions").glob(pattern), key=_patch, reverse=True)]
    uv = shutil.which("uv")
    if uv:
        done = subprocess.run([uv, "python", "find", "--no-project", version], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            found.append(done.stdout.strip())
    return found


def find_python(version: str) -> str | None:
    """The first candidate that runs and is `version`, or None."""
    return next((c for c in candidates(version) if _version_of(c) == version), None)


def _pins() -> list[str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def _isolated_pip_env() -> dict[str, str]:
    """pip reading no configuration file and no PIP_* variable: the check is about PyPI, not a local mirror."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _wheels_for(
    python_version: str, target: str, pins: list[str], scratch: Path, pip_python: str = sys.executable
) -> dict[str, str]:
    """{pin: the wheel pip would install} for one target, or {pin: 'MISSING ...'} for the pins without one."""
    tag = "cp" + python_version.replace(".", "")
    platforms = [arg for p in PLATFORMS[target] for arg in ("--platform", p)]

    def ask(requirements: list[str]) -> tuple[subprocess.CompletedProcess, dict]:
        fd, name = tempfile.mkstemp(prefix="report-", suffix=".json", dir=scratch)
        os.close(fd)
        report = Path(name)
        done = subprocess.run(
            [pip_python, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", "--no-deps"]
            + ["--target", str(scratch / "never-written"), "--only-binary=:all:", "--index-url", PYPI]
            + ["--python-version", python_version, "--implementation", "cp", "--abi", tag, *platforms]
            + ["--report", str(report), *requirements],
            capture_output=True,
            text=True,
            env=_isolated_pip_env(),
        )
        data = json.loads(report.read_text()) if done.returncode == 0 and report.stat().st_size else {}
        report.unlink(missing_ok=True)
        return done, data

    done, data = ask(pins)
    if done.returncode == 0:
        by_name = {i["metadata"]["name"].lower().replace("_", "-"): i for i in data["install"]}
        return {pin: by_name[_name(pin)]["download_info"]["url"].rsplit("/", 1)[-1] for pin in pins}
    # One of them has no wheel: pip stops at the first, so ask pin by pin to name them all.
    answers = {}
    for pin in pins:
        one, data = ask([pin])
        if one.returncode == 0:
            answers[pin] = data["install"][0]["download_info"]["url"].rsplit("/", 1)[-1]
        else:
            reason = (one.stderr.strip().splitlines() or ["pip failed"])[-1]
            answers[pin] = f"MISSING ({reason})"
    return answers


def _name(pin: str) -> str:
    return re.split(r"[<>=!~\[; ]", pin, maxsplit=1)[0].lower().replace("_", "-")


def pypi_reachable(timeout_s: float = 10.0) -> str | None:
    """None when PyPI answers, else why not."""
    try:
        with urllib.request.urlopen(f"{PYPI}/pip/", timeout=timeout_s):
            return None
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))


def check_wheels(pip_python: str = sys.executable) -> tuple[int, list[str]]:
    """Every pin has a wheel (binary or pure Python) for each of 3.12 and 3.13 on each platform: (0, lines to print),
    else (1, lines naming the pins without one)."""
    why = pypi_reachable()
    if why is not None:
        return 0, [f"wheel check skipped: PyPI ({PYPI}) cannot be reached from here ({why})"]
    pins = _pins()
    targets = [(v, t) for v in WHEEL_PYTHONS for t in PLATFORMS]
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wheel-check-") as scratch:
        with concurrent.futures.ThreadPoolExecutor(len(targets)) as pool:
            futures = {(v, t): pool.submit(_wheels_for, v, t, pins, Path(scratch), pip_python) for v, t in targets}
            answers = {key: future.result() for key, future in futures.items()}
    missing = [(pin, v, t, a[pin]) for (v, t), a in answers.items() for pin in pins if a[pin].startswith("MISSING")]
    pure = sorted({pin for a in answers.values() for pin in pins if a[pin].endswith("-none-any.whl")})
    compiled = len(pins) - len(pure)
    lines = [
        f"wheel check: {len(pins)} pins x CPython {' and '.join(WHEEL_PYTHONS)} x {', '.join(PLATFORMS)} "
        f"({time.monotonic() - began:.0f} s): {compiled} pins have compiled wheels, {len(pure)} are pure Python"
    ]
    lines += [f"  {pin}: no wheel for CPython {version} on {target}: {why}" for pin, version, target, why in missing]
    if missing:
        return 1, [
            *lines,
            "wheel check FAILED: change the pins above in constraints.txt (or the ranges in pyproject.toml)",
        ]
    return 0, [*lines, "wheel check: every pin has a wheel for every target"]


def _digest() -> str:
    return hashlib.sha256(b"".join((ROOT / f).read_bytes() for f in ("pyproject.toml", "constraints.txt"))).hexdigest()


def _run(step: str, command: list[str], env: dict[str, str] | None = None) -> float:
    """Run one step from the checkout's root, its output passed through; seconds taken, or SystemExit on failure."""
    print(f"--- {step}: {' '.join(command)}", flush=True)
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env)
    seconds = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"other-python: {step} failed (exit {done.returncode}) after {seconds:.0f} s")
    return seconds


def run_tier(python: str, version: str, notebooks: tuple[str, ...]) -> dict[str, float]:
    """Environment, unit tier and notebooks on `python`; seconds per step."""
    place = ROOT / "build" / f"python{version}"
    venv = place / "venv"
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    vpython = str(bin_dir / ("python.exe" if os.name == "nt" else "python"))
    stamp = venv / ".installed"
    seconds: dict[str, float] = {}
    if not (stamp.exists() and stamp.read_text() == _digest()):
        shutil.rmtree(venv, ignore_errors=True)  # a half-built one from an interrupted run is not reused
        seconds["venv"] = _run("venv", [python, "-m", "venv", str(venv)])
        # --no-compile: a test run imports a small part of what it installs; pip's byte-compiling all of it is minutes
        seconds["install"] = _run(
            "install",
            [vpython, "-m", "pip", "install", "--quiet", "--no-compile", "-c", "constraints.txt", "-e", ".[lab,test]"],
        )
        stamp.write_text(_digest())
    env = dict(os.environ, LABKIT_PROFILE="quick", LABKIT_HEADLESS="1")
    pytest = [vpython, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    seconds["unit"] = _run("unit tier", [*pytest, "tests", "-m", UNIT_MARKERS], env)

    under_test = place / "under-test"
    shutil.rmtree(under_test, ignore_errors=True)
    paths = [f"notebooks/{slug}.ipynb" for slug in notebooks]
    results = under_test / "results"
    nb_env = dict(env, LABKIT_AUDIT_PLOTS="1", LABKIT_CLAIMS="strict", LABKIT_RESULTS_DIR=str(results))
    checks = [
        f"tests/test_notebooks.py::test_notebook_ran_to_its_end_with_the_quick_parameters[{s}]" for s in notebooks
    ]
    seconds["notebooks"] = _run("prepare", [vpython, "tests/prepare_notebooks.py", str(under_test), *paths])
    seconds["notebooks"] += _run(
        "notebooks",
        [*pytest, "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=300"]
        + [str(under_test / f"{s}.ipynb") for s in notebooks]
        + checks,
        nb_env,
    )
    for slug in notebooks:  # the kernel was this environment's, not another python3 kernel found on the machine
        ran_on = json.loads((results / f"{slug}.json").read_text())["card"]["python"]
        if not ran_on.startswith(f"{version}."):
            raise SystemExit(f"other-python: {slug} ran on Python {ran_on}, not {version}: the kernel was not ours")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", help="the Python to find, MAJOR.MINOR (default 3.13)")
    parser.add_argument("--python", help="the interpreter to use instead of looking for one")
    parser.add_argument("--wheels-only", action="store_true", help="only check that every pin has wheels")
    parser.add_argument("--no-wheels", action="store_true", help="skip the wheel check")
    args = parser.parse_args(argv)
    if args.version is not None and not re.fullmatch(r"3\.\d+", args.version):
        parser.error(f"--version {args.version!r}: give MAJOR.MINOR, e.g. 3.13")
    if args.wheels_only and args.no_wheels:
        parser.error("--wheels-only and --no-wheels leave nothing to do: give one of them")

    began = time.monotonic()
    if args.wheels_only:
        rc, lines = check_wheels()
        print("\n".join(lines))
        return rc
    if args.python:
        version = _version_of(args.python)
        if version is None:
            parser.error(f"--python {args.python}: it does not run (give the path of a Python interpreter)")
        if args.version is not None and version != args.version:
            parser.error(f"--python {args.python} is Python {version}, not the --version {args.version} asked for")
        python = args.python
    else:
        version = args.version or "3.13"
        found = find_python(version)
        if found is None:
            print(
                f"other-python tier skipped: no Python {version} here (looked for python{version} on PATH, under "
                f"pyenv's versions and among uv's Pythons); install one, e.g. `pyenv install {version}`, to run it"
            )
            return 0
        python = found
    print(f"other-python tier: Python {version} ({python})", flush=True)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        wheels = None if args.no_wheels else pool.submit(check_wheels, python)  # network-bound: beside the install
        try:
            seconds = run_tier(python, version, NOTEBOOKS)
        finally:
            wheels_rc, lines = wheels.result() if wheels is not None else (0, [])
            print("\n".join(lines))
    total = time.monotonic() - began
    steps = ", ".join(f"{step} {s:.0f} s" for step, s in seconds.items())
    print(f"other-python tier on Python {version}: passed in {total:.0f} s ({steps})")
    return wheels_rc


if __name__ == "__main__":
    sys.exit(main())
