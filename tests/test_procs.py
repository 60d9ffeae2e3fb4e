"""labkit.core.procs: stopping children through a second interrupt, and temporary folders a killed process left."""

import _thread
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from labkit.core import procs

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
)


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler, as a kernel or a terminal has it. A command started in the background by a
    non-interactive shell (``make test &``, nohup) inherits SIGINT ignored, and then no interrupt arrives at all."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.processes
def test_a_second_interrupt_while_stopping_still_ends_every_child(ctrl_c_raises):
    children = [subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE) for _ in range(2)]
    for child in children:
        assert child.stdout.readline() == b"ready\n"  # its SIGTERM handler is in place
    timer = threading.Timer(0.3, _thread.interrupt_main)  # the learner presses Ctrl-C again, mid-grace
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        procs.stop(children, grace_s=30)  # would wait 30 s for processes that ignore SIGTERM
    assert time.monotonic() - start < 5
    assert all(child.poll() == -signal.SIGKILL for child in children)
    for child in children:
        child.stdout.close()


def test_sweep_removes_the_folders_of_dead_processes_only(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = tmp_path / f"labkit-ddp-{dead.pid}-abc123"
    mine = tmp_path / f"labkit-trainer-{os.getpid()}-def456"
    other = tmp_path / f"someone-{dead.pid}-else"
    for folder in (gone, mine, other):
        folder.mkdir()
        (folder / "rank0.log").write_text("x")
    assert procs.sweep_tempdirs(str(tmp_path)) == [str(gone)]
    assert not gone.exists() and mine.exists() and other.exists()
    with pytest.raises(ValueError, match="kind must be a short name"):
        procs.owned_tempdir("../x")


@pytest.mark.processes
def test_a_folder_left_by_a_killed_process_is_removed_by_the_next_one(tmp_path):
    script = (
        "import os, signal, sys; from labkit.core import procs; "
        f"d = procs.owned_tempdir('ddp', dir={str(tmp_path)!r}); print(d.name, flush=True); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL
    left = child.stdout.strip()
    assert os.path.isdir(left), "SIGKILL gave it no chance to clean up"
    with procs.owned_tempdir("ddp", dir=str(tmp_path)) as mine:
        assert not os.path.exists(left) and os.path.isdir(mine)
    assert os.listdir(tmp_path) == []
