"""labkit.workloads.checkpoint: complete or absent, refused when wrong, resumed exactly; a sharded save with DCP."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from labkit.core.errors import CheckpointError
from labkit.workloads import checkpoint
from labkit.workloads.models import MLP


def trained(width=16, seed=0):
    torch.manual_seed(seed)
    model = MLP(8, width, 2, 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
    return model, opt


def test_a_checkpoint_restores_weights_optimizer_and_random_state(tmp_path):
    model, opt = trained()
    order = torch.Generator().manual_seed(5)
    torch.randint(0, 10, (3,), generator=order)
    torch.manual_seed(123)
    size = checkpoint.save(tmp_path / "a.pt", model, opt, step=7, generator=order, extra={"note": "x"})
    assert size == (tmp_path / "a.pt").stat().st_size and not list(tmp_path.glob("*.partial"))
    expected_next, expected_data = torch.rand(3), torch.randint(0, 10, (3,), generator=order)

    fresh, fresh_opt = trained(seed=1)
    fresh_order = torch.Generator().manual_seed(99)
    state = checkpoint.load(tmp_path / "a.pt", fresh, fresh_opt, generator=fresh_order)
    assert state["step"] == 7 and state["extra"] == {"note": "x"}
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(opt.state_dict()["state"][0]["exp_avg"], fresh_opt.state_dict()["state"][0]["exp_avg"])
    assert torch.equal(torch.rand(3), expected_next)
    assert torch.equal(torch.randint(0, 10, (3,), generator=fresh_order), expected_data)


def test_cut_short_foreign_missing_and_unmarked_checkpoints_are_clear_errors(tmp_path):
    model, opt = trained()
    for step in (10, 20):
        checkpoint.save(tmp_path / checkpoint.checkpoint_name(step), model, opt, step=step)
    good = tmp_path / checkpoint.checkpoint_name(20)
    torn = tmp_path / checkpoint.checkpoint_name(30)
    torn.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="not a complete checkpoint"):
        checkpoint.load(torn, model)
    state, skipped = checkpoint.resume(tmp_path, model, opt)
    assert state["step"] == 20 and len(skipped) == 1 and skipped[0].startswith("step-000030.pt is not a complete")
    # the file's name, not the caller's folder; torch's reason cut to its first sentence (no advice paragraph)
    assert str(tmp_path) not in skipped[0] and "miniz" not in skipped[0] and skipped[0].count(". ") == 0

    wide, _ = trained(width=32)
    with pytest.raises(CheckpointError, match=r"another model's state: .*\[16, 8\] in the file, \[32, 8\] here"):
        checkpoint.load(good, wide)
    with pytest.raises(CheckpointError, match="another model"):
        checkpoint.resume(tmp_path, wide)  # not skipped: resuming the wrong job is an error
    with pytest.raises(CheckpointError, match="no checkpoint at .*step-000099.pt; its folder holds"):
        checkpoint.load(tmp_path / "step-000099.pt", model)
    torch.save({"weights": 1}, tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="not written by labkit's save"):
        checkpoint.load(tmp_path / "plain.pt", model)
    bare = tmp_path / "bare.pt"
    checkpoint.save(bare, model, step=1)
    with pytest.raises(CheckpointError, match="no optimizer state"):
        checkpoint.load(bare, model, opt)
    assert checkpoint.resume(tmp_path / "empty", model) == (None, [])


SLOW_SAVE = """
import sys, torch
from labkit.workloads import checkpoint
model = torch.nn.Linear(4096, 4096 * 4)  # about 270 MB: the save takes a while
checkpoint.save(sys.argv[1], model, step=2)
"""


@pytest.mark.processes
def test_a_save_killed_mid_write_leaves_the_previous_checkpoint_in_charge(tmp_path):
    checkpoint.save(tmp_path / checkpoint.checkpoint_name(1), torch.nn.Linear(4, 4), step=1)
    target = tmp_path / checkpoint.checkpoint_name(2)
    partial = target.with_name(target.name + ".partial")
    proc = subprocess.Popen([sys.executable, "-c", SLOW_SAVE, str(target)])
    try:
        deadline = time.monotonic() + 60
        while not (partial.exists() and partial.stat().st_size > 1 << 20):
            assert proc.poll() is None, "the save finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not target.exists() and partial.exists()
    assert [p.name for p in checkpoint.checkpoints(tmp_path)] == [checkpoint.checkpoint_name(1)]
    state, skipped = checkpoint.resume(tmp_path, torch.nn.Linear(4, 4))
    assert state["step"] == 1 and skipped == []


@pytest.mark.processes
def test_a_killed_trainer_resumes_bit_for_bit(tmp_path):
    whole = checkpoint.run_trainer(tmp_path / "whole", 60, 20)
    killed = checkpoint.run_trainer(tmp_path / "crash", 60, 20, kill_after=30)
    resumed = checkpoint.run_trainer(tmp_path / "crash", 60, 20)
    assert killed.killed and killed.returncode == -signal.SIGKILL
    assert resumed.from_step == (max(killed.losses) + 1) // 20 * 20 and resumed.from_step >= 20
    assert sorted(resumed.losses) == list(range(resumed.from_step, 60))
    assert all(resumed.losses[s] == whole.losses[s] for s in resumed.losses)
    # and a different seed really changes the losses (the equality above is not vacuous)
    other = checkpoint.run_trainer(tmp_path / "other", 5, 5, sizes=checkpoint.TrainerSizes(seed=1))
    assert other.losses[4] != whole.losses[4]


def test_bad_arguments_are_clear_errors(tmp_path):
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="steps must be a positive integer"):
            checkpoint.run_trainer(tmp_path, bad, 1)
    with pytest.raises(ValueError, match="kill_after must be a step from 0 to 9"):
        checkpoint.run_trainer(tmp_path, 10, 5, kill_after=10)
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="nbytes must be a positive integer"):
            checkpoint.write_file(tmp_path / "x", bad)


def test_the_disk_helpers_write_read_and_evict(tmp_path):
    path = tmp_path / "data.bin"
    assert checkpoint.write_file(path, 3 * checkpoint.CHUNK + 5) == path.stat().st_size == 3 * checkpoint.CHUNK + 5
    checkpoint.evict(path)
    assert checkpoint.read_file(path) == path.stat().st_size
    old = path.stat().st_ino
    hard_link = tmp_path / "kept.bin"
    os.link(path, hard_link)  # holds the old file's inode, so a new file cannot reuse its number
    assert checkpoint.write_file(path, 10) == 10 and path.stat().st_ino != old, "each write is to a new file"
    assert hard_link.stat().st_size == 3 * checkpoint.CHUNK + 5, "the old file is replaced, not truncated"


def test_the_file_system_is_read_from_the_mount_table_and_scratch_avoids_memory(tmp_path, monkeypatch):
    mounts = "/dev/vda / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n/dev/vdb /tmp/disk xfs rw 0 0\n"
    real_read_text = checkpoint.Path.read_text
    monkeypatch.setattr(
        checkpoint.Path,
        "read_text",
        lambda self, *a, **k: mounts if str(self) == "/proc/mounts" else real_read_text(self, *a, **k),
    )
    monkeypatch.setattr(checkpoint.os.path, "realpath", lambda p: str(p))
    assert checkpoint.file_system("/tmp") == "tmpfs"
    assert checkpoint.file_system("/tmp/x/y") == "tmpfs"
    assert checkpoint.file_system("/tmp/disk/y") == "xfs"
    assert checkpoint.file_system("/tmpfoo") == "ext4", "a mount point is a whole path component"
    monkeypatch.setattr(checkpoint.tempfile, "gettempdir", lambda: "/tmp")
    made = []
    monkeypatch.setattr(checkpoint.procs, "owned_tempdir", lambda kind, dir=None: made.append((kind, dir)))
    checkpoint.scratch_folder("p")
    assert made == [("p", "/var/tmp")], "a /tmp in memory gives way to /var/tmp"


def test_the_file_system_is_none_without_a_mount_table(monkeypatch):
    def missing(self, *a, **k):
        raise FileNotFoundError(self)

    monkeypatch.setattr(checkpoint.Path, "read_text", missing)
    assert checkpoint.file_system(".") is None


@pytest.mark.processes
def test_a_sharded_dcp_checkpoint_writes_a_shard_per_rank_and_loads_back(tmp_path):
    from labkit.parallel import distributed, sharded_checkpoint

    ranks = distributed.launch(
        sharded_checkpoint.sharded_checkpoint, 2, folder=str(tmp_path / "dcp"), width=256, depth=2, classes=4
    )
    files = ranks[0]["files"]
    assert set(files) == {"__0_0.distcp", "__1_0.distcp", ".metadata"}
    for r in ranks:
        assert r["loaded_equal"]
        assert abs(files[f"__{r['rank']}_0.distcp"] / r["local_bytes"] - 1) < 0.1


def test_the_async_speedup_is_bounded_by_the_free_core():
    # save 40 ms (a 5 ms copy, then a 35 ms write), training 30 ms
    serial = 40 + 30
    assert checkpoint.async_speedup(0.040, 0.005, 0.030, idle_cores=2.0) == pytest.approx(serial / (5 + 35))
    assert checkpoint.async_speedup(0.040, 0.005, 0.030, idle_cores=3.5) == pytest.approx(serial / (5 + 35))
    assert checkpoint.async_speedup(0.040, 0.005, 0.060, idle_cores=2.0) == pytest.approx(100 / (5 + 60))
    # half a core free: the write takes 70 ms beside training, and the stretch 75 ms, more than one after the other
    assert checkpoint.async_speedup(0.040, 0.005, 0.030, idle_cores=1.5) == pytest.approx(serial / (5 + 30 + 35))
    assert checkpoint.async_speedup(0.040, 0.005, 0.030, idle_cores=0.7) == 1.0, "no core free: nothing overlaps"
    assert checkpoint.async_speedup(0.040, 0.005, 0.030, idle_cores=None) == pytest.approx(serial / 40)
    with pytest.raises(ValueError, match="save_s must be a finite number, zero or more"):
        checkpoint.async_speedup(-1.0, 0.0, 0.0, 2.0)
