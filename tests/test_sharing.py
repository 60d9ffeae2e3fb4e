"""labkit.serving.sharing: the background trainer and the OS isolation levers."""

import os
import time

import psutil
import pytest

from labkit.core import errors
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
    for bad in (dict(d_in=-5), dict(hidden=2.5), dict(batch=True)):
        with pytest.raises(ValueError, match=f"{next(iter(bad))} must be a whole number, 1 or more"):
            sharing.BackgroundTrainer(**bad)
    with pytest.raises(ValueError, match="max_s must be a finite number of seconds"):
        sharing.BackgroundTrainer(max_s=float("inf"))


@pytest.mark.processes
def test_steps_per_s_needs_a_window_with_progress():
    with sharing.BackgroundTrainer(threads=1, max_s=30, d_in=64, hidden=64, batch=32) as trainer:
        with pytest.raises(RuntimeError, match="too little.*before its first logged step"):
            trainer.steps_per_s(0.0, 1.0)  # 1970: nothing logged then
        with pytest.raises(ValueError, match="the window must end after it starts"):
            trainer.steps_per_s(time.time(), time.time() - 1)


@pytest.mark.processes
def test_a_paused_trainer_makes_no_progress_and_still_stops_cleanly():
    trainer = sharing.BackgroundTrainer(threads=1, max_s=30, d_in=64, hidden=64, batch=32).start()
    with trainer:
        trainer.pause()
        time.sleep(0.1)  # its last line is logged before this window
        start = time.time()
        time.sleep(0.4)
        assert trainer.steps_per_s(start, time.time()) == 0.0  # no step while frozen
        trainer.resume()
        start = time.time()
        time.sleep(0.5)
        assert trainer.steps_per_s(start, time.time()) > 10
        trainer.pause()  # left paused: stop() must still end it
        pid = trainer.pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(RuntimeError, match="started already"):
        trainer.start()


@pytest.mark.processes
def test_a_trainer_that_fails_at_start_says_why():
    trainer = sharing.BackgroundTrainer(threads=1, max_s=30, d_in=64, hidden=2**40, batch=32)  # 2**48 bytes of weights
    with pytest.raises(
        errors.TrainerStopped, match=r"exited with code 1 before its first step; its last output:(.|\n)*alloc"
    ):
        with trainer:
            pass
    assert trainer.proc.poll() is not None and not trainer.log_path.exists()


@pytest.mark.processes
def test_a_trainer_killed_inside_the_window_gets_no_made_up_rate():
    with sharing.BackgroundTrainer(threads=1, max_s=30, d_in=64, hidden=64, batch=32) as trainer:
        start = time.time()
        time.sleep(0.3)
        half_way = trainer.steps_per_s(start, time.time())
        assert half_way > 10
        os.kill(trainer.pid, 9)
        trainer.proc.wait(timeout=10)
        time.sleep(0.3)
        with pytest.raises(errors.TrainerStopped, match=r"killed by signal 9 .* s into the window"):
            trainer.steps_per_s(start, time.time())


def test_steps_in_a_window_are_interpolated_between_log_lines():
    points = [(10.0, 100), (10.5, 150), (20.0, 151), (20.5, 201)]  # paused from 10.5 to 20
    assert sharing._steps_at(points, 10.25) == 125.0
    assert sharing._steps_at(points, 30.0) == 201.0  # after the last line: the count as it stands
    rate = (sharing._steps_at(points, 20.5) - sharing._steps_at(points, 10.0)) / 10.5
    assert rate == pytest.approx(101 / 10.5)  # the pause counts: about 9.6 steps/s, not the 100 while running


@pytest.mark.processes
def test_a_trainer_that_outlived_its_max_s_says_so_when_paused():
    """A measurement that outlasts the trainer's own time limit (the full profile on a slow machine did) gets the
    reason, not a bare "not running"."""
    with sharing.BackgroundTrainer(threads=1, max_s=1, d_in=64, hidden=64, batch=32) as trainer:
        trainer.proc.wait(timeout=30)
        with pytest.raises(
            errors.TrainerStopped, match=r"exited with code 0 after its max_s of 1 s .* before it could"
        ):
            trainer.pause()
    with pytest.raises(RuntimeError, match="was not started"):
        sharing.BackgroundTrainer(threads=1, max_s=5).resume()
