"""labkit.serving.sharing: the background trainer and the OS isolation levers."""

import os
import time

import psutil
import pytest

from labkit.serving import sharing


@pytest.mark.processes
def test_background_trainer_reports_progress_obeys_levers_and_leaves_nothing_behind():
    with sharing.BackgroundTrainer(threads=1, max_s=30, d_in=64, hidden=64, batch=32) as trainer:
        pid = trainer.pid
        start = time.time()
        time.sleep(0.6)
        assert trainer.steps_per_s(start, time.time()) > 10
        sharing.set_nice(pid, 19)
        assert psutil.Process(pid).nice() == 19
        if sharing.can_pin():
            cpu = min(os.sched_getaffinity(0))
            sharing.set_affinity(pid, {cpu})
            assert psutil.Process(pid).cpu_affinity() == [cpu]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not trainer.log_path.exists(), "its temporary directory is removed"


def test_levers_refuse_bad_values():
    with pytest.raises(ValueError, match="nice must be between -20 and 19"):
        sharing.set_nice(os.getpid(), 40)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        sharing.BackgroundTrainer(threads=0)


@pytest.mark.processes
def test_steps_per_s_needs_a_window_with_progress():
    with sharing.BackgroundTrainer(threads=1, max_s=30, d_in=64, hidden=64, batch=32) as trainer:
        with pytest.raises(RuntimeError, match="too little"):
            trainer.steps_per_s(0.0, 1.0)  # 1970: nothing logged then


@pytest.mark.processes
def test_a_paused_trainer_makes_no_progress_and_still_stops_cleanly():
    trainer = sharing.BackgroundTrainer(threads=1, max_s=30, d_in=64, hidden=64, batch=32).start()
    with trainer:
        trainer.pause()
        start = time.time()
        time.sleep(0.4)
        with pytest.raises(RuntimeError, match="too little"):
            trainer.steps_per_s(start, time.time())
        trainer.resume()
        start = time.time()
        time.sleep(0.5)
        assert trainer.steps_per_s(start, time.time()) > 10
        trainer.pause()  # left paused: stop() must still end it
        pid = trainer.pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(RuntimeError, match="started already"):
        trainer.start()
