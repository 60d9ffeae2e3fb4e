"""Checkpoints that a crash cannot fake, and a training job that is killed and resumed (notebook `checkpoints`).

- :func:`save` writes a checkpoint the way a crash cannot turn into a half-file under the real name: to
  ``<name>.partial``, flushed to the disk (``fsync``), then renamed (``os.replace`` is atomic on POSIX file
  systems), and the folder synced so the rename itself survives a power cut.
- :func:`load` restores a model, its optimizer and the random-number state, and says clearly what is wrong with a
  checkpoint that is missing, cut short, corrupt, or written by a different model.
- :func:`resume` takes the newest checkpoint in a folder that loads, skipping (and naming) any that do not.
- ``python -m labkit.workloads.checkpoint`` is the training job: a small MLP on a synthetic task that saves every
  ``--every`` steps, logs each step's loss, and resumes from its folder when started again. :func:`run_trainer`
  starts it, optionally SIGKILLs it after a given step, and reads back what it logged.
- :func:`write_file`, :func:`read_file` and :func:`evict` measure the disk: fsync'd writes, and reads with the
  file's pages dropped from the page cache (``posix_fadvise(DONTNEED)``) or left in it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from ..core import checks, procs
from ..core.errors import CheckpointError
from ..core.result import Result

FORMAT = "labkit-checkpoint/1"
NAME = re.compile(r"step-(\d{6,})\.pt")
CHUNK = 8 << 20  # bytes per write or read call


def checkpoint_name(step: int) -> str:
    """``step-000120.pt``: the name a checkpoint of ``step`` gets (names sort by step). Taught in notebook `checkpoints`."""
    checks.whole("step", step, minimum=0)
    return f"step-{step:06d}.pt"


def fingerprint(model: torch.nn.Module) -> dict[str, list[int]]:
    """Each entry of the model's state dict and its shape: what a checkpoint must match to be this model's."""
    return {name: list(t.shape) for name, t in model.state_dict().items()}


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(
    path: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    step: int,
    extra: dict | None = None,
    generator: torch.Generator | None = None,
) -> int:
    """Write a complete checkpoint at ``path`` or nothing there; return its bytes.

    Taught in notebook `checkpoints`.

    It holds the weights, the optimizer's state, ``step``, the global random state and ``generator``'s (the data
    order), and ``extra``. Written to ``<path>.partial``, fsync'd, renamed onto ``path``, folder fsync'd: a process
    killed while writing leaves only the ``.partial`` file, which :func:`resume` never reads.
    """
    path = Path(path)
    state = {
        "format": FORMAT,
        "fingerprint": fingerprint(model),
        "step": int(step),
        "model": model.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "rng": torch.get_rng_state(),
        "data_rng": None if generator is None else generator.get_state(),
        "extra": extra or {},
    }
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)
    _fsync_folder(path.parent)
    return path.stat().st_size


def load(
    path: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    generator: torch.Generator | None = None,
) -> dict:
    """Restore ``model`` (and ``optimizer``, the random state, ``generator``) from ``path``; return the checkpoint.

    Taught in notebook `checkpoints`.

    A missing file, one that is cut short or corrupt, one that is not a labkit checkpoint, or one written by a
    model of another shape is a :class:`~labkit.core.errors.CheckpointError` that says which and what to do. It
    names the file, not its folder (the caller named that), and gives the first sentence of torch's own reason.
    """
    path = Path(path)
    if not path.is_file():
        near = sorted(p.name for p in path.parent.glob("*")) if path.parent.is_dir() else []
        raise CheckpointError(
            f"no checkpoint at {path.name}; its folder holds {near or 'nothing'} (start without one, or name a file "
            "that save() wrote)"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a truncated or damaged zip archive
        reason = str(exc).split(". ")[0].rstrip(".")  # torch's first sentence says what failed; the rest is advice
        raise CheckpointError(
            f"{path.name} is not a complete checkpoint (cut short or corrupt: {type(exc).__name__}: {reason}); use "
            "an earlier one (resume() does)"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path.name} was not written by labkit's save() (no {FORMAT!r} format mark)")
    ours, theirs = fingerprint(model), state["fingerprint"]
    if ours != theirs:
        missing = sorted(set(theirs) - set(ours))[:3]
        extra = sorted(set(ours) - set(theirs))[:3]
        shapes = [f"{k}: {theirs[k]} in the file, {ours[k]} here" for k in ours if k in theirs and ours[k] != theirs[k]]
        raise CheckpointError(
            f"{path.name} holds another model's state: "
            + "; ".join(
                part
                for part in (
                    f"only in the file {missing}" if missing else "",
                    f"only in this model {extra}" if extra else "",
                    ", ".join(shapes[:3]),
                )
                if part
            )
        )
    model.load_state_dict(state["model"])
    if optimizer is not None:
        if state["optimizer"] is None:
            raise CheckpointError(f"{path.name} holds no optimizer state; load it without an optimizer")
        optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    if generator is not None and state["data_rng"] is not None:
        generator.set_state(state["data_rng"])
    return state


def checkpoints(folder: str | Path) -> list[Path]:
    """The complete checkpoints in ``folder`` (named by :func:`checkpoint_name`), oldest first.

    Taught in notebook `checkpoints`. ``.partial`` files (a save that did not finish) are not among them.
    """
    folder = Path(folder)
    found = [p for p in folder.glob("step-*.pt") if NAME.fullmatch(p.name)] if folder.is_dir() else []
    return sorted(found, key=lambda p: int(NAME.fullmatch(p.name).group(1)))  # type: ignore[union-attr]


def resume(
    folder: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    generator: torch.Generator | None = None,
) -> tuple[dict | None, list[str]]:
    """Load the newest checkpoint in ``folder`` that loads; return it (None if none) and why others were skipped.

    Taught in notebook `checkpoints`. A checkpoint of another model is not skipped: that is an error.
    """
    skipped: list[str] = []
    for path in reversed(checkpoints(folder)):
        try:
            return load(path, model, optimizer, generator=generator), skipped
        except CheckpointError as exc:
            if "another model" in str(exc):
                raise
            skipped.append(str(exc))  # the message begins with the file's name
    return None, skipped


# --- the disk ---------------------------------------------------------------------------------------------------


@functools.cache
def _random_block() -> bytes:
    """CHUNK random bytes, made once: drawing them (about 3 ms a MiB) would be timed as the disk's."""
    return os.urandom(CHUNK)


def write_file(path: str | Path, nbytes: int, fsync: bool = True) -> int:
    """Write ``nbytes`` to ``path`` in 8 MiB calls, then (``fsync``) wait until the disk has them. Returns bytes.

    Taught in notebook `checkpoints`. Without ``fsync`` the call returns once the bytes are in the page cache.
    The file is always a new one (an old one at ``path`` is removed first): when a file that was truncated and
    rewritten is closed, ext4 starts writing it back (its ``auto_da_alloc`` default: ``ext4_release_file`` calls
    ``ext4_alloc_da_blocks``, which calls ``filemap_flush`` to start the writes without waiting for them; Linux's
    fs/ext4/file.c and inode.c), which would put part of the disk's time into a write without ``fsync``.
    """
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 1:
        raise ValueError(f"nbytes must be a positive integer, got {nbytes!r}")
    block = memoryview(_random_block())[: min(nbytes, CHUNK)]  # slices of a view copy nothing
    Path(path).unlink(missing_ok=True)
    with open(path, "xb") as f:
        left = nbytes
        while left:
            left -= f.write(block[: min(left, len(block))])
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    return nbytes


def async_speedup(save_s: float, blocked_s: float, train_s: float, idle_cores: float | None) -> float:
    """The most an asynchronous save can speed up "save, then train", from first principles (notebook `checkpoints`).

    A blocking save takes ``save_s``, then training ``train_s``. An async save blocks training for ``blocked_s``
    (copying the state), then writes the rest, ``save_s - blocked_s``, on a background thread while training goes
    on; that thread runs beside training only on a core no program uses: ``idle_cores`` (measured with
    :func:`labkit.instruments.timing.idle_cores`) less the one training needs, at most one. With a fraction f of a
    core the write takes (save_s - blocked_s) / f, so the stretch takes blocked_s + max(train_s, that), and never
    more than doing both one after the other; with no core free, nothing overlaps (1.0). None for ``idle_cores``
    (not measurable here) counts as one core free.
    """
    for name, value in dict(save_s=save_s, blocked_s=blocked_s, train_s=train_s).items():
        checks.amount(name, value)
    if idle_cores is not None:
        checks.amount("idle_cores", idle_cores)
    free = 1.0 if idle_cores is None else min(1.0, max(0.0, idle_cores - 1.0))
    write = max(0.0, save_s - blocked_s)
    serial = blocked_s + train_s + write
    overlapped = blocked_s + max(train_s, write / free) if free > 0 else serial
    return (save_s + train_s) / min(serial, overlapped)


MEMORY_FILE_SYSTEMS = frozenset({"tmpfs", "ramfs"})


def file_system(path: str | Path) -> str | None:
    """The type of the file system that holds ``path`` (``"ext4"``, ``"tmpfs"``, ...), read from ``/proc/mounts``;
    None where there is no such table (macOS, Windows). Taught in notebook `checkpoints`."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:  # elsewhere (macOS, Windows): None, as the docstring says
        return None
    where = os.path.realpath(path)
    best, kind = "", None
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def scratch_folder(kind: str = "scratch") -> tempfile.TemporaryDirectory:
    """A temporary folder on a disk, ``labkit-<kind>-<pid>-...`` (removed by its ``cleanup()``, when the process
    ends, or, if the process was killed, by the next labkit process that makes one there).

    Taught in notebook `checkpoints`. The system's temporary folder is often a file system held in memory
    (``tmpfs``: ``/tmp`` on Fedora and Arch), where ``fsync`` and a cold read cost nothing and a disk cannot be
    measured; then ``/var/tmp`` (on a disk, by the File System Hierarchy Standard) or the current folder is used.
    If all of them are in memory, the system's temporary folder is used all the same: :func:`file_system` says so.
    """
    candidates = [tempfile.gettempdir(), "/var/tmp", os.getcwd()]
    for where in candidates:
        usable = os.path.isdir(where) and os.access(where, os.W_OK | os.X_OK)
        if usable and file_system(where) not in MEMORY_FILE_SYSTEMS:
            return procs.owned_tempdir(kind, dir=where)
    return procs.owned_tempdir(kind)


def evict(path: str | Path) -> None:
    """Ask the kernel to drop ``path``'s pages from the page cache, so the next read comes from the disk.

    Taught in notebook `checkpoints`. The pages must be clean (fsync'd) to be dropped; on a file system held
    in memory (tmpfs) there is no disk to go back to and nothing changes.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):  # elsewhere (macOS, Windows): the pages stay cached, the next read warm
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_file(path: str | Path) -> int:
    """Read all of ``path`` in 8 MiB calls; return the bytes read. Taught in notebook `checkpoints`."""
    total = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(CHUNK):
            total += len(chunk)
    return total


# --- the training job that is killed and resumed --------------------------------------------------------------


@dataclass(frozen=True)
class TrainerSizes:
    """The training job's sizes: model, synthetic data set, batch and learning rate. Taught in notebook `checkpoints`."""

    d_in: int = 32
    hidden: int = 256
    depth: int = 2
    classes: int = 8
    samples: int = 4096
    batch: int = 64
    lr: float = 1e-3
    seed: int = 0


def trainer_model(sizes: TrainerSizes = TrainerSizes()) -> torch.nn.Module:
    """The training job's model (an MLP of ``sizes``), to load its checkpoints into. Taught in notebook `checkpoints`."""
    from .models import MLP

    return MLP(sizes.d_in, sizes.hidden, sizes.depth, sizes.classes)


def _task(sizes: TrainerSizes) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(sizes.seed + 1)
    x = torch.randn(sizes.samples, sizes.d_in, generator=g)
    teacher = torch.randn(sizes.d_in, sizes.classes, generator=g)
    return x, (x @ teacher).argmax(dim=1)


def _train(folder: Path, log: Path, steps: int, every: int, sizes: TrainerSizes) -> None:
    torch.set_num_threads(1)  # one thread: the same operations in the same order, so every run is bit-identical
    torch.manual_seed(sizes.seed)
    model = trainer_model(sizes)
    optimizer = torch.optim.Adam(model.parameters(), lr=sizes.lr)
    order = torch.Generator().manual_seed(sizes.seed + 2)  # the data loader's state: which samples come next
    x, y = _task(sizes)
    state, skipped = resume(folder, model, optimizer, generator=order)
    start = 0 if state is None else state["step"]
    with open(log, "a") as out:
        out.write(json.dumps({"event": "start", "from_step": start, "skipped": skipped, "t": time.time()}) + "\n")
        out.flush()
        for step in range(start, steps):
            batch = torch.randint(0, sizes.samples, (sizes.batch,), generator=order)
            loss = F.cross_entropy(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            saved = None
            if (step + 1) % every == 0:
                t0 = time.perf_counter()
                save(folder / checkpoint_name(step + 1), model, optimizer, step=step + 1, generator=order)
                saved = time.perf_counter() - t0
            out.write(json.dumps({"step": step, "loss": loss.item(), "t": time.time(), "save_s": saved}) + "\n")
            out.flush()


@dataclass
class TrainerRun(Result):
    """What one start of the training job logged: each step's loss, where it started, when, and how it ended."""

    losses: dict[int, float] = field(default_factory=dict)
    from_step: int = 0
    skipped: list[str] = field(default_factory=list)
    launched_at: float = 0.0  # time.time() when the process was started
    first_step_at: float | None = None  # when its first step was logged
    step_times: dict[int, float] = field(default_factory=dict)
    save_s: list[float] = field(default_factory=list)
    killed: bool = False
    returncode: int | None = None

    @property
    def startup_s(self) -> float | None:
        """From starting the process to its first logged step: interpreter, imports, loading the checkpoint."""
        return None if self.first_step_at is None else self.first_step_at - self.launched_at


def run_trainer(
    folder: str | Path,
    steps: int,
    every: int,
    *,
    kill_after: int | None = None,
    sizes: TrainerSizes = TrainerSizes(),
    timeout_s: float = 120.0,
) -> TrainerRun:
    """Start the training job on ``folder`` (resuming from its newest checkpoint) and wait for it.

    Taught in notebook `checkpoints`.

    With ``kill_after`` it is SIGKILLed as soon as it logs that step: no handler runs, nothing is flushed, as
    when a node loses power. The process is gone when this returns, whatever happened.
    """
    for name, value in dict(steps=steps, every=every).items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if kill_after is not None and not 0 <= kill_after < steps:
        raise ValueError(f"kill_after must be a step from 0 to {steps - 1}, got {kill_after!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"log-{time.time_ns()}.jsonl"
    command = [sys.executable, "-m", __name__, "--folder", str(folder), "--log", str(log), "--steps", str(steps),
               "--every", str(every), "--sizes", json.dumps(sizes.__dict__)]  # fmt: skip
    run = TrainerRun(launched_at=time.time())
    proc = subprocess.Popen(command, env=procs.child_env(), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the training job did not finish within {timeout_s:g} s")
            if kill_after is not None and _logged_step(log) >= kill_after:
                proc.kill()  # SIGKILL
                run.killed = True
                break
            time.sleep(0.005)
        proc.wait()
    finally:
        procs.stop([proc])
    run.returncode = proc.returncode
    stderr = proc.stderr.read() if proc.stderr else ""
    if not run.killed and proc.returncode != 0:
        raise RuntimeError(f"the training job failed (exit {proc.returncode}): {stderr.strip()[-2000:]}")
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # the last line of a killed run may be cut short
            continue
        if entry.get("event") == "start":
            run.from_step, run.skipped = entry["from_step"], entry["skipped"]
        elif "step" in entry:
            run.losses[entry["step"]] = entry["loss"]
            run.step_times[entry["step"]] = entry["t"]
            run.first_step_at = run.first_step_at or entry["t"]
            if entry["save_s"] is not None:
                run.save_s.append(entry["save_s"])
    log.unlink()
    return run


def _logged_step(log: Path) -> int:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 512))
            lines = f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return -1
    for line in reversed(lines):
        match = re.search(r'"step": (\d+)', line)
        if match:
            return int(match.group(1))
    return -1


def main(argv: list[str] | None = None) -> None:
    """The training job's entry point (``python -m labkit.workloads.checkpoint``): :func:`run_trainer` starts it."""
    parser = argparse.ArgumentParser(description="labkit's resumable training job (notebook `checkpoints`)")
    parser.add_argument("--folder", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--every", type=int, required=True)
    parser.add_argument("--sizes", default="{}")
    args = parser.parse_args(argv)
    procs.die_with_parent()
    _train(Path(args.folder), Path(args.log), args.steps, args.every, TrainerSizes(**json.loads(args.sizes)))


if __name__ == "__main__":
    main()
