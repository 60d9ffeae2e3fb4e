"""The doctor's checks that need Jupyter or start processes: a kernel, the widgets' extension, a process group.

Used by ``python -m labkit doctor`` (:mod:`labkit.lab.doctor`, notebook `start_here` says when to run it). Each
check returns a :class:`Finding` rather than raising: the doctor prints one line per check and goes on to the next.
Whatever happens, what a check started is stopped: the kernel shut down (killed if it does not answer) and its
connection file removed; the process group's workers stopped and reaped by the launcher, its port freed, and the
check's own process (it runs apart: this floor does not import :mod:`labkit.parallel`) killed with them at its
deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.procs import child_env

KERNEL_NAME = "python3"  # the kernel every notebook names, and the one papermill and nbval are told to use
KERNEL_TIMEOUT_S = 60.0  # a first start on a laptop with a virus scanner can take tens of seconds
GROUP_TIMEOUT_S = 60.0  # the whole two-rank run, as labkit.parallel.group_check runs it
START_GRACE_S = 30.0  # for the check's own Python to start (it imports PyTorch) before the run's deadline counts
# The notebooks that launch worker processes in a process group (`labkit.parallel.distributed.launch`); a test
# checks this against the notebooks' code.
NEED_PROCESS_GROUP = ("multiple_gpus", "sharding", "checkpoints", "mixture_of_experts")
WIDGETS_EXTENSION = "@jupyter-widgets/jupyterlab-manager"  # the JupyterLab extension package jupyterlab_widgets holds


@dataclass(frozen=True)
class Finding:
    """One check's verdict: ``status`` is ``ok``, ``note`` (runs, with a caveat) or ``PROBLEM`` (with a fix)."""

    status: str
    check: str
    text: str

    def line(self) -> str:
        """The line the doctor prints for it."""
        return f"  {self.status:8s} {self.check:9s} {self.text}"


def all_clear(check: str, text: str) -> Finding:
    """A check that passed."""
    return Finding("ok", check, text)


def needs_fix(check: str, text: str) -> Finding:
    """A check that failed; ``text`` says what to do."""
    return Finding("PROBLEM", check, text)


def check_kernel(kernel_name: str = KERNEL_NAME, timeout_s: float = KERNEL_TIMEOUT_S) -> Finding:
    """Start the Jupyter kernel the notebooks use, run a cell in it (can it find labkit?), and shut it down.

    Uses ``jupyter_client``, as JupyterLab, papermill and nbval do, so a kernel that fails here fails there too. The
    kernel's own output goes to a temporary file, whose last line a problem quotes. Whatever happens, the kernel is
    shut down (killed if it does not answer) and its connection file removed.
    """
    try:
        from jupyter_client.kernelspec import NoSuchKernel
        from jupyter_client.manager import KernelManager
    except ImportError as exc:
        return needs_fix("kernel", f"cannot import jupyter_client ({exc}); fix: `make lab` installs JupyterLab")
    started = time.monotonic()
    manager = KernelManager(kernel_name=kernel_name)
    printed: list[str] = []
    with tempfile.TemporaryFile() as kernel_log:
        try:
            reply = _run_cell(manager, kernel_log, timeout_s, printed)
        except NoSuchKernel:
            return needs_fix(
                "kernel",
                f"Jupyter knows no kernel named {kernel_name!r}; fix: `make lab` installs ipykernel, which provides "
                f"it (or `python -m ipykernel install --user --name {kernel_name}` from the course's environment)",
            )
        except (RuntimeError, TimeoutError, OSError) as exc:
            kernel_log.seek(0)
            said = [line for line in kernel_log.read().decode(errors="replace").splitlines() if line.strip()]
            last = f"; it printed: {said[-1].strip()[:200]}" if said else ""
            return needs_fix(
                "kernel",
                f"the {kernel_name!r} kernel did not start and run a cell within {timeout_s:g} s "
                f"({type(exc).__name__}: {exc}){last}. Fix: run `make lab` again (it reinstalls ipykernel); if a "
                "security tool blocks local connections, allow Python to use 127.0.0.1",
            )
    if reply.get("status") != "ok":
        return needs_fix(
            "kernel",
            f"the {kernel_name!r} kernel started but its cell failed "
            f"({reply.get('ename')}: {reply.get('evalue')}); fix: run `make lab` again",
        )
    found, _, executable = "".join(printed).strip().partition(" ")
    if found != "True":
        return needs_fix(
            "kernel",
            f"the {kernel_name!r} kernel runs {executable or 'a Python'}, which cannot import labkit: JupyterLab would "
            f"open the notebooks in the wrong environment. Fix: start JupyterLab with `make lab`; `jupyter kernelspec "
            f"list` shows where the {kernel_name!r} kernel comes from",
        )
    return all_clear(
        "kernel",
        f"the {kernel_name!r} Jupyter kernel started, ran a cell, found labkit and shut down "
        f"({time.monotonic() - started:.1f} s)",
    )


_KERNEL_CELL = "import importlib.util, sys\nprint(importlib.util.find_spec('labkit') is not None, sys.executable)"


def _run_cell(manager: Any, kernel_log: Any, timeout_s: float, printed: list[str]) -> dict:
    """Start ``manager``'s kernel, wait for it, run :data:`_KERNEL_CELL`; always shut it down. Returns the reply."""

    def collect(msg: dict) -> None:
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])

    client = None
    clean = False
    try:
        manager.start_kernel(stdout=kernel_log, stderr=kernel_log)
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=timeout_s)
        reply = client.execute_interactive(_KERNEL_CELL, timeout=timeout_s, output_hook=collect)
        clean = True
        return reply["content"]
    finally:
        if client is not None:
            client.stop_channels()
        if manager.has_kernel:
            manager.shutdown_kernel(now=not clean)  # a polite shutdown when it answers, else killed at once
        manager.cleanup_resources()


def check_widgets() -> Finding:
    """ipywidgets and JupyterLab's widget extension (``jupyterlab_widgets``), installed, enabled and matching."""
    try:
        import ipywidgets
    except ImportError as exc:
        return needs_fix("widgets", f"cannot import ipywidgets ({exc}); fix: `make lab` installs it")
    extension = _installed_extension(WIDGETS_EXTENSION)
    if extension is None:
        return needs_fix(
            "widgets",
            f"ipywidgets {ipywidgets.__version__} is installed but JupyterLab's widget extension ({WIDGETS_EXTENSION}, "
            "from the jupyterlab_widgets package) is not, so sliders show as text. Fix: `make lab` (or `pip install "
            "jupyterlab_widgets` in the course's environment), then restart JupyterLab",
        )
    if WIDGETS_EXTENSION in _disabled_extensions():
        return needs_fix(
            "widgets",
            f"JupyterLab's widget extension is disabled, so sliders show as text. Fix: "
            f"`jupyter labextension enable {WIDGETS_EXTENSION}`, then restart JupyterLab",
        )
    mismatch = _widgets_mismatch()
    if mismatch:
        return needs_fix("widgets", f"{mismatch}. Fix: reinstall from the pins with `make clean lab`")
    return all_clear(
        "widgets",
        f"ipywidgets {ipywidgets.__version__} and JupyterLab's widget extension "
        f"{extension['version']} are installed and enabled",
    )


# JupyterLab finds a prebuilt extension as <data path>/labextensions/<name>/package.json, in each of Jupyter's data
# paths, and reads the disabled ones from <config path>/labconfig/page_config.json ("disabledExtensions": a mapping
# to true, or a list). jupyterlab_server.config reads both the same way, but importing it starts most of a Jupyter
# server (seconds on a laptop); these few lines read the same files.
def _labextension_paths() -> list[str]:
    """Where JupyterLab looks for prebuilt extensions (``share/jupyter/labextensions`` of each Jupyter data path)."""
    from jupyter_core.paths import jupyter_path

    return jupyter_path("labextensions")


def _installed_extension(name: str) -> dict | None:
    for folder in _labextension_paths():
        package = Path(folder, *name.split("/"), "package.json")
        if package.is_file():
            return json.loads(package.read_text(encoding="utf-8"))
    return None


def _disabled_extensions() -> set[str]:
    from jupyter_core.paths import jupyter_config_path

    state: dict[str, bool] = {}
    for folder in reversed(jupyter_config_path()):  # the system's first, the user's last: the user's setting wins
        page_config = Path(folder, "labconfig", "page_config.json")
        try:
            listed = json.loads(page_config.read_text(encoding="utf-8")).get("disabledExtensions") or {}
        except (OSError, ValueError, AttributeError):
            continue
        state.update(listed if isinstance(listed, dict) else dict.fromkeys(listed, True))
    return {name for name, disabled in state.items() if disabled}


def _widgets_mismatch() -> str | None:
    """Whether the installed jupyterlab_widgets is one ipywidgets asks for (its own requirement, read with packaging)."""
    from importlib.metadata import PackageNotFoundError, requires, version

    from packaging.requirements import Requirement

    for text in requires("ipywidgets") or []:
        wanted = Requirement(text)
        if wanted.name.replace("-", "_").lower() != "jupyterlab_widgets" or wanted.marker is not None:
            continue
        try:
            installed = version("jupyterlab_widgets")
        except PackageNotFoundError:
            return "ipywidgets needs the jupyterlab_widgets package, which is not installed"
        if not wanted.specifier.contains(installed, prereleases=True):
            return f"ipywidgets {version('ipywidgets')} wants jupyterlab_widgets{wanted.specifier}; {installed} is installed"
    return None


def check_process_group(timeout_s: float = GROUP_TIMEOUT_S, deadline_s: float | None = None) -> Finding:
    """Two processes form a two-rank gloo process group on 127.0.0.1 and all-reduce a tensor.

    Runs ``python -m labkit.parallel.group_check`` (the launcher the notebooks in :data:`NEED_PROCESS_GROUP` use, with
    ``timeout_s`` as its deadline) in a process of its own, given ``deadline_s`` (default: ``timeout_s`` plus
    :data:`START_GRACE_S` for Python to start) before it is stopped with whatever it started.
    """
    deadline_s = timeout_s + START_GRACE_S if deadline_s is None else deadline_s
    command = [sys.executable, "-m", "labkit.parallel.group_check", "--timeout-s", f"{timeout_s:g}"]
    started = time.monotonic()
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
        start_new_session=os.name == "posix",  # its own session, so a stop reaches its workers; elsewhere: see _stop
    )  # fmt: skip
    try:
        printed, complaint = proc.communicate(timeout=deadline_s)
    except BaseException as exc:  # the deadline, or an interrupt: nothing it started may outlive the doctor
        _stop(proc)
        if isinstance(exc, subprocess.TimeoutExpired):
            return needs_fix(
                "processes",
                f"the process-group check did not finish within {deadline_s:g} s and was "
                f"stopped, with its workers. {_group_fix()}",
            )
        raise
    lines = printed.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        said = complaint.strip().splitlines()[-1:] or ["nothing"]
        return needs_fix(
            "processes",
            f"the process-group check exited with code {proc.returncode} and said: "
            f"{said[0][:200]}. Fix: run `make lab` again",
        )
    return group_finding(result, time.monotonic() - started)


def group_finding(result: dict, seconds: float) -> Finding:
    """The doctor's line for what ``python -m labkit.parallel.group_check`` printed."""
    needs = ", ".join(f"`{slug}`" for slug in NEED_PROCESS_GROUP)
    if result["ok"]:
        return all_clear(
            "processes",
            f"two processes formed a gloo group on 127.0.0.1 and all-reduced correctly "
            f"({seconds:.1f} s); notebooks {needs} need this",
        )
    if result["kind"] == "bind":
        return needs_fix("processes", f"cannot listen on a port of 127.0.0.1 ({result['error']}). {_group_fix()}")
    if result["kind"] == "sum":
        return needs_fix(
            "processes",
            "two processes formed a gloo group, but their all-reduce gave a wrong sum; fix: "
            "reinstall PyTorch from the pins with `make clean lab`",
        )
    return needs_fix(
        "processes", f"two processes could not form a gloo group on 127.0.0.1: {result['error']}. {_group_fix()}"
    )


def _group_fix() -> str:
    needs = ", ".join(f"`{slug}`" for slug in NEED_PROCESS_GROUP)
    return (
        "Fix: allow Python to accept connections from this machine (a firewall or endpoint-protection prompt; on "
        "macOS System Settings > Network > Firewall), or pause a VPN that takes over local traffic; then run the "
        f"doctor again. Without it notebooks {needs} cannot start their workers"
    )


def _stop(proc: subprocess.Popen) -> None:
    """Kill the check and everything it started, and reap it."""
    if os.name == "posix":  # its session: the check and its workers at once; elsewhere the check alone (below)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.poll() is None:  # elsewhere its workers, told their parent, stop at their own collective's timeout
        proc.kill()
    proc.wait()
