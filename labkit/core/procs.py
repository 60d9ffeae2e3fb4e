"""Child processes that never outlive the notebook that started them (notebooks `multiple_gpus`, `latency_throughput` and `sharing_a_gpu`).

One place for what labkit's launcher (:mod:`labkit.parallel.distributed`), background trainer (:mod:`labkit.serving.sharing`)
and load generator (``labkit/serving/loadgen.py``) each need: the environment that names the parent, the request to
die with it, stopping a group of processes (terminate, then kill, always reaped), and checking that a port is
free again. Standard library only: the load generator runs as a script and imports this file without PyTorch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable

PARENT_ENV = "LABKIT_PARENT"  # the process id a child must not outlive
HOST = "127.0.0.1"


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child, naming this process as the parent it must not outlive."""
    return {**os.environ, PARENT_ENV: str(os.getpid()), **extra}


def die_with_parent(parent_pid: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies, so a crashed kernel leaves no orphan.

    ``parent_pid`` defaults to ``$LABKIT_PARENT`` (set by :func:`child_env`), else the current parent. If the
    parent is already gone, exit at once. Elsewhere than Linux this does nothing (each launcher also stops its
    children itself).
    """
    if parent_pid is None:
        value = os.environ.get(PARENT_ENV, "").strip()
        parent_pid = int(value) if value.isdigit() else os.getppid()
    if not sys.platform.startswith("linux"):  # elsewhere: nothing (each launcher stops its children itself)
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def stop(procs: Iterable[subprocess.Popen], grace_s: float = 2.0) -> None:
    """Terminate every process still running, kill those that outlast ``grace_s``, and reap them all.

    A process paused with SIGSTOP is continued first: it would not act on SIGTERM until then. An interrupt
    (a second Ctrl-C) while waiting out the grace period kills every process at once and reaps it before it
    propagates: no worker is left running however impatient the learner.
    """
    procs = list(procs)
    try:
        for p in procs:
            if p.poll() is None:
                if hasattr(signal, "SIGCONT"):  # elsewhere (Windows): no process can be paused, none continued
                    try:
                        os.kill(p.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                p.terminate()
        deadline = time.monotonic() + grace_s
        for p in procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    except BaseException:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            _reap(p)
        raise


def _reap(p: subprocess.Popen) -> None:
    """Wait for a killed process, through any further interrupt: SIGKILL ends it within moments."""
    while True:
        try:
            p.wait()
            return
        except KeyboardInterrupt:
            continue


TEMP_PREFIX = "labkit-"


def owned_tempdir(kind: str, dir: str | None = None) -> tempfile.TemporaryDirectory:
    """A temporary folder named after ``kind`` and this process (``labkit-<kind>-<pid>-...``), removed on cleanup.

    A process killed outright (SIGKILL, a crashed kernel) cannot remove its folders; the next labkit process to
    make one in the same place (``dir``, else the system's temporary folder) removes every ``labkit-*-<pid>-*``
    folder there whose process no longer exists (:func:`sweep_tempdirs`).
    """
    if not kind.isidentifier():
        raise ValueError(f"kind must be a short name (letters, digits, _), got {kind!r}")
    sweep_tempdirs(dir)
    return tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{kind}-{os.getpid()}-", dir=dir)


def _pid_alive(pid: int) -> bool:
    if os.name == "nt":  # elsewhere, os.kill(pid, 0) would stop it (Ctrl-C): it is taken for alive, its folder kept
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, and not ours to judge
        return True
    return True


def sweep_tempdirs(root: str | None = None) -> list[str]:
    """Remove the ``labkit-<kind>-<pid>-*`` folders in ``root`` (the system's temporary folder) whose process has
    died; return their paths. A folder whose process still runs, or that this user cannot remove, is left."""
    import re
    import shutil

    root = root or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        match = re.fullmatch(rf"{TEMP_PREFIX}[A-Za-z_][A-Za-z0-9_]*-(\d+)-\w+", name)
        path = os.path.join(root, name)
        if match and os.path.isdir(path) and not _pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.exists(path):
                removed.append(path)
    return removed


def port_in_use(port: int, host: str = HOST) -> bool:
    """Whether a server still listens on ``port`` (notebooks `multiple_gpus` and `latency_throughput` check that a run left none).

    It tries to connect: refused means nobody listens. (Closed connections may linger in the kernel's
    TIME_WAIT state for a minute; they hold no listener and no process, so they do not count.)
    """
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0
