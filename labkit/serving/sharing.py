"""Training and inference on one machine: a background training job, and the levers that isolate them.

Taught in notebook `sharing_a_gpu`. :class:`BackgroundTrainer` runs a training loop in its own process (as a
co-located training job would), logging its progress, so its throughput can be read for any window
of time. The isolation levers are the operating system's: scheduling priority (``nice``, the CPU's
analogue of CUDA stream priorities) and CPU affinity (pinning processes to separate cores, the
analogue of MIG/MPS partitions). On Linux both apply per thread, so they are set on every thread
of the process (``/proc/<pid>/task``). Run as ``python -m labkit.serving.sharing``, this module is the trainer.
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from ..core.errors import TrainerStopped
from ..core.procs import child_env, die_with_parent, owned_tempdir, stop


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:  # elsewhere (no /proc): the process alone
        return [pid]


def can_pin() -> bool:
    """Whether this platform can pin processes to cores (Linux), and has at least two to pin to.

    Taught in notebook `sharing_a_gpu`.
    """
    return hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2  # elsewhere: False


def set_affinity(pid: int, cpus: set[int]) -> None:
    """Pin every thread of process ``pid`` to ``cpus`` (Linux). Taught in notebook `sharing_a_gpu`."""
    if not hasattr(os, "sched_setaffinity"):  # elsewhere: an error saying so (the notebook asks can_pin() first)
        raise OSError("CPU affinity cannot be set on this platform (Linux only)")
    for tid in _threads(pid):
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass


def set_nice(pid: int, nice: int) -> None:
    """Set the scheduling niceness (-20 most favoured … 19 least) of every thread of ``pid``.

    Taught in notebook `sharing_a_gpu`.

    Raising niceness is always allowed; lowering it below its start value needs privileges, so a
    process set to 19 may not come back to 0 for an ordinary user: restart it instead.
    """
    if not -20 <= nice <= 19:
        raise ValueError(f"nice must be between -20 and 19, got {nice}")
    if not hasattr(os, "setpriority"):  # elsewhere (Windows): an error saying so
        raise OSError("niceness cannot be set on this platform (POSIX systems only)")
    for tid in _threads(pid):
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except ProcessLookupError:
            pass


class BackgroundTrainer:
    """A training job in its own process, for ``max_s`` seconds at most. Use it as a context manager.

    Taught in notebook `sharing_a_gpu`.

    It trains an MLP on random data with ``threads`` torch threads and logs ``time steps`` lines;
    :meth:`steps_per_s` reads its throughput over any window of wall-clock time. What the job prints (an error's
    traceback) goes to a file beside its log, and comes back in the :class:`~labkit.core.errors.TrainerStopped`
    raised when it exits before its first step or inside a window.
    """

    def __init__(self, threads: int = 2, max_s: float = 60.0, d_in: int = 512, hidden: int = 1024, batch: int = 256):
        if threads < 1 or max_s <= 0:
            raise ValueError(f"threads must be >= 1 and max_s > 0, got threads={threads}, max_s={max_s}")
        for name, value in dict(threads=threads, d_in=d_in, hidden=hidden, batch=batch).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number, 1 or more; got {value!r}")
        if not isinstance(max_s, (int, float)) or not math.isfinite(max_s):
            raise ValueError(f"max_s must be a finite number of seconds, got {max_s!r}")
        self.args = dict(threads=threads, max_s=max_s, d_in=d_in, hidden=hidden, batch=batch)
        self._tmp = owned_tempdir("trainer")
        self.log_path = Path(self._tmp.name) / "progress.txt"
        self.output_path = Path(self._tmp.name) / "output.txt"
        self.proc: subprocess.Popen | None = None
        self._started = 0.0  # time.monotonic() at start

    def start(self) -> BackgroundTrainer:
        """Start the process without waiting for its first step (start several, then enter each)."""
        if self.proc is not None:
            raise RuntimeError("this trainer was started already")
        a = self.args
        cmd = [sys.executable, "-m", "labkit.serving.sharing", "--log", str(self.log_path), "--threads", str(a["threads"]),
               "--max-seconds", str(a["max_s"]), "--d-in", str(a["d_in"]), "--hidden", str(a["hidden"]),
               "--batch", str(a["batch"])]  # fmt: skip
        env = child_env(OMP_NUM_THREADS=str(a["threads"]))
        with open(self.output_path, "wb") as output:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                cmd, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
            )
        self._started = time.monotonic()
        return self

    def _exited(self, when: str) -> TrainerStopped:
        assert self.proc is not None
        code = self.proc.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        ran_s = time.monotonic() - self._started
        if code == 0 and ran_s >= self.args["max_s"]:  # it stopped itself, as it does after max_s
            how += f" after its max_s of {self.args['max_s']:g} s (it had been started {ran_s:.0f} s before)"
        try:
            tail = self.output_path.read_text(errors="replace").strip().splitlines()[-8:]
        except OSError:
            tail = []
        printed = ("; its last output:\n    " + "\n    ".join(tail)) if tail else " and printed nothing"
        return TrainerStopped(f"the trainer {how} {when}{printed}")

    def __enter__(self) -> BackgroundTrainer:
        if self.proc is None:
            self.start()
        proc = self.proc
        assert proc is not None  # started above
        deadline = time.monotonic() + 60
        while not self._read():  # wait until it is training
            if proc.poll() is not None:
                error = self._exited("before its first step")
                self.stop()
                raise error
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the trainer did not start within 60 s")
            time.sleep(0.05)
        return self

    def pause(self) -> None:
        """Freeze the job (SIGSTOP): it keeps its memory and uses no CPU until :meth:`resume` (notebook `sharing_a_gpu`
        interleaves rounds with and without it). POSIX only."""
        self._signal("SIGSTOP")

    def resume(self) -> None:
        """Let a paused job run again (SIGCONT)."""
        self._signal("SIGCONT")

    def _signal(self, name: str) -> None:
        if not hasattr(signal, name):  # elsewhere (Windows, no SIGSTOP or SIGCONT): an error saying so
            raise RuntimeError(f"this platform has no {name}: a trainer cannot be paused here")
        if self.proc is None:
            raise RuntimeError("the trainer was not started: call start() or enter it first")
        if self.proc.poll() is not None:
            verb = "paused" if name == "SIGSTOP" else "resumed"
            raise self._exited(f"before it could be {verb}")
        os.kill(self.proc.pid, getattr(signal, name))

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("the trainer is not running")
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None:
            stop([self.proc], grace_s=5.0)  # continues a paused job first: it would not act on SIGTERM
        self._tmp.cleanup()

    def _read(self) -> list[tuple[float, int]]:
        try:
            lines = self.log_path.read_text().split("\n")[:-1]  # a last line without its newline is still being written
        except OSError:
            return []
        points = []
        for line in lines:
            parts = line.split()
            if len(parts) == 2:
                points.append((float(parts[0]), int(parts[1])))
        return points

    def steps_per_s(self, start: float, end: float) -> float:
        """Training steps per second between wall-clock times ``start`` and ``end`` (``time.time()``).

        The steps done by ``end`` minus those done by ``start``, over ``end - start``: the log's step counts,
        interpolated between its lines (one every 50 ms or every step, whichever is longer), so a job that was
        starved or paused for part of the window gets its true, lower rate. After the last line the count is
        taken as it stands, which is right for a paused job; for a job that has exited it would be made up, so
        that raises :class:`~labkit.core.errors.TrainerStopped` with its exit code and output.
        """
        if not end > start:
            raise ValueError(f"the window must end after it starts, got start={start!r}, end={end!r}")
        points = self._read()
        if not points or points[0][0] > start:
            raise RuntimeError("the trainer logged too little in that window to measure its speed: the window "
                               "starts before its first logged step")  # fmt: skip
        if self.proc is not None and self.proc.poll() is not None and points[-1][0] < end:
            raise self._exited(f"{points[-1][0] - start:.2f} s into the window (its steps/s there would be made up)")
        return (_steps_at(points, end) - _steps_at(points, start)) / (end - start)


def _steps_at(points: list[tuple[float, int]], t: float) -> float:
    """Steps done by time ``t``: interpolated between the log lines around it; the last count after the last."""
    times = [p[0] for p in points]
    i = bisect.bisect_right(times, t)
    if i >= len(points):
        return float(points[-1][1])
    (t0, s0), (t1, s1) = points[i - 1], points[i]
    return s0 + (s1 - s0) * (t - t0) / (t1 - t0)


def _train(log: Path, threads: int, max_s: float, d_in: int, hidden: int, batch: int) -> None:
    import torch.nn.functional as F

    from ..core.allocator import keep_freed_memory
    from ..workloads.models import MLP

    torch.set_num_threads(threads)
    keep_freed_memory()  # as in the notebook beside it (labkit.start)
    model = MLP(d_in, hidden, 3, 10)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, d_in), torch.randint(0, 10, (batch,))
    start = last = time.time()
    steps = 0
    with open(log, "a") as f:
        while time.time() - start < max_s:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            steps += 1
            now = time.time()
            if now - last >= 0.05:
                f.write(f"{now:.6f} {steps}\n")
                f.flush()
                last = now


def main(argv: list[str] | None = None) -> None:
    """``python -m labkit.serving.sharing``: the background training job, logging each step's time to a file."""
    parser = argparse.ArgumentParser(prog="python -m labkit.serving.sharing", description="A background training job.")
    parser.add_argument("--log", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--d-in", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=256)
    ns = parser.parse_args(argv)
    die_with_parent()  # never outlive the notebook ($LABKIT_PARENT, set by child_env)
    _train(Path(ns.log), ns.threads, ns.max_seconds, ns.d_in, ns.hidden, ns.batch)


if __name__ == "__main__":
    main()
