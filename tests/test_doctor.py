import io
import os
import subprocess
import sys

import pytest
import torch
import torchvision

from labkit.lab import doctor


def test_healthy_setup_passes_and_prints_the_card():
    out = io.StringIO()
    assert doctor.run("cpu", ceilings=False, out=out) == 0
    text = out.getvalue()
    assert "machine card" in text and "torch_threads" in text and "OK, ready" in text


def test_ceilings_are_measured_and_printed():
    out = io.StringIO()
    assert doctor.run("cpu", ceilings=True, out=out) == 0
    assert "GFLOP/s" in out.getvalue() and "GB/s" in out.getvalue()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_missing_device_is_reported_with_a_fix():
    out = io.StringIO()
    assert doctor.run("cuda", ceilings=False, out=out) == 1
    assert "PROBLEM" in out.getvalue() and "fix:" in out.getvalue()


def test_mismatched_torchvision_is_reported(monkeypatch):
    def broken_nms(*args, **kwargs):
        raise RuntimeError("operator torchvision::nms does not exist")

    monkeypatch.setattr(torchvision.ops, "nms", broken_nms)
    out = io.StringIO()
    assert doctor.run("cpu", ceilings=False, out=out) == 1
    assert "does not match torch" in out.getvalue() and "make clean lab" in out.getvalue()


@pytest.mark.processes
def test_command_line_exit_codes():
    env = {**os.environ, "LABKIT_DEVICE": "cpu"}
    ok = subprocess.run(
        [sys.executable, "-m", "labkit", "doctor", "--no-ceilings"], capture_output=True, text=True, env=env
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    env["LABKIT_DEVICE"] = "tpu"
    bad = subprocess.run(
        [sys.executable, "-m", "labkit", "doctor", "--no-ceilings"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 1
    assert "LABKIT_DEVICE='tpu' is not allowed" in bad.stdout and "allowed: auto, cpu" in bad.stdout


def test_a_missing_cpp_compiler_is_a_note_with_a_fix_not_a_failure(monkeypatch):
    monkeypatch.setenv("CXX", "")
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    out = io.StringIO()
    assert doctor.run("cpu", ceilings=False, out=out) == 0
    assert "no C++ compiler found" in out.getvalue() and "apt install g++" in out.getvalue()
