import io
import json
import logging
import os
import re
import subprocess
import sys
import warnings
from collections import namedtuple
from pathlib import Path

import nbformat
import psutil
import pytest
import torch
import torchvision

from labkit.core.errors import DistributedRunError
from labkit.instruments import ceilings
from labkit.instruments.timing import NoisyMeasurementWarning
from labkit.lab import doctor, doctor_checks, manifest, sizes
from labkit.parallel import distributed, group_check

ROOT = Path(__file__).resolve().parents[1]
# What a raw warning looks like on a terminal: Python's "file.py:12: SomeWarning: ...", or PyTorch's logger's
# "W1207 20:39:09.166000 21529 path/file.py:630] ..."
RAW_WARNING = re.compile(r"\.py:\d+: \w*Warning|^[WE]\d{4} \d\d:\d\d:\d\d|site-packages", re.M)


def _run(**options) -> tuple[int, str]:
    out = io.StringIO()
    code = doctor.run("cpu", out=out, **{"ceilings": False, "processes": False, **options})
    return code, out.getvalue()


def _line(text: str, check: str) -> str:
    found = [line for line in text.splitlines() if re.match(rf"  \S+\s+{check} ", line)]
    assert len(found) == 1, f"expected one line for check {check!r} in:\n{text}"
    return found[0]


def test_healthy_setup_passes_and_prints_one_line_per_check():
    code, text = _run()
    assert code == 0, text
    for check in ("packages", "device", "cores", "disk", "widgets"):
        assert _line(text, check).startswith(f"  ok       {check}")
    assert (
        "machine card" in text
        and "torch_threads" in text
        and text.rstrip().endswith("OK, ready to run the notebooks on cpu")
    )


def test_ceilings_use_start_heres_sizes_and_the_notebooks_thread_setting(monkeypatch):
    """The doctor's ceiling is start_here's: the same sizes, and labkit.start's thread count (not the process's)."""
    monkeypatch.setenv("LABKIT_THREADS", "3")  # neither this process's count nor the machine's cores
    seen = []
    real = ceilings.measure_matmul_ceiling

    def spy(device, dtype, n, min_run_s):
        seen.append((torch.get_num_threads(), n, min_run_s))
        return real(device, dtype, n=64, min_run_s=0.01)

    monkeypatch.setattr(ceilings, "measure_matmul_ceiling", spy)
    real_copy = ceilings.measure_copy_bandwidth

    def copy_spy(device, mib, min_run_s):
        seen.append((torch.get_num_threads(), mib, min_run_s))
        return real_copy(device, mib=1, min_run_s=0.01)

    monkeypatch.setattr(ceilings, "measure_copy_bandwidth", copy_spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        code, text = _run(ceilings=True)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    quick = sizes.settings("start_here", "quick")
    assert code == 0, text
    assert seen == [(3, quick.matmul_n, quick.min_run_s)] * 2 + [(3, quick.copy_mib, quick.min_run_s)]
    assert re.search(r"^  torch_threads\s+3$", text, re.M) and "3 PyTorch threads as the notebooks use" in text
    assert after == 2, "the doctor must give the process its thread count back"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_missing_device_is_reported_with_a_fix():
    out = io.StringIO()
    assert doctor.run("cuda", ceilings=False, out=out, processes=False) == 1
    assert "PROBLEM" in out.getvalue() and "fix:" in out.getvalue()


def test_a_mistyped_setting_stops_the_doctor_with_what_is_allowed(monkeypatch):
    monkeypatch.setenv("LABKIT_THREADS", "many")
    code, text = _run()
    assert code == 1 and "LABKIT_THREADS='many' is not allowed" in text and "python -m labkit settings" in text


def test_mismatched_torchvision_is_reported(monkeypatch):
    def broken_nms(*args, **kwargs):
        raise RuntimeError("operator torchvision::nms does not exist")

    monkeypatch.setattr(torchvision.ops, "nms", broken_nms)
    code, text = _run()
    assert code == 1
    assert "does not match torch" in text and "make clean lab" in text


def test_a_missing_cpp_compiler_is_a_note_with_a_fix_not_a_failure(monkeypatch):
    monkeypatch.setenv("CXX", "")
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    code, text = _run()
    assert code == 0
    assert _line(text, "compiler").startswith("  note") and "apt install g++" in text


def test_too_little_disk_is_a_problem_that_says_how_much_is_wanted(monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda path: usage(100 * 2**30, 99.5 * 2**30, 2**29))
    code, text = _run()
    assert code == 1
    line = _line(text, "disk")
    assert line.startswith("  PROBLEM") and "only 0.50 GiB free" in line and f"want {doctor.MIN_FREE_GIB:g} GiB" in line
    assert "PROBLEM line(s) above" in text and "OK, ready" not in text


def test_disk_is_measured_where_the_course_lives():
    finding = doctor.check_disk()
    assert finding.status == "ok", finding
    free = float(re.search(r"([\d.]+) GiB free", finding.text).group(1))
    assert free == pytest.approx(psutil.disk_usage(str(ROOT)).free / 2**30, abs=0.5)


def test_one_core_is_a_note_that_says_what_it_means_for_the_claims(monkeypatch):
    import labkit.core.device as device_mod
    import labkit.lab.session as session

    monkeypatch.delenv("LABKIT_THREADS", raising=False)
    for module in (device_mod, session):  # what the doctor counts, and what labkit.start's thread setting counts
        monkeypatch.setattr(module, "usable_cores", lambda: 1)
    finding = doctor.check_cores()
    assert finding.status == "note" and "undecided" in finding.text and "2 cores or more" in finding.text
    for module in (device_mod, session):
        monkeypatch.setattr(module, "usable_cores", lambda: 4)
    assert doctor.check_cores() == doctor_checks.all_clear(
        "cores", "4 usable cores: the notebooks run PyTorch on 3 of them and leave 1 to the rest of the machine"
    )


def test_widgets_and_their_jupyterlab_extension_are_found():
    finding = doctor_checks.check_widgets()
    assert finding.status == "ok" and "installed and enabled" in finding.text, finding


def test_a_missing_widgets_extension_is_a_problem(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor_checks, "_labextension_paths", lambda: [str(tmp_path)])
    finding = doctor_checks.check_widgets()
    assert (
        finding.status == "PROBLEM" and "jupyterlab_widgets" in finding.text and "sliders show as text" in finding.text
    )


def test_a_disabled_widgets_extension_is_a_problem(monkeypatch, tmp_path):
    (tmp_path / "labconfig").mkdir()
    disabled = {"disabledExtensions": {doctor_checks.WIDGETS_EXTENSION: True}}
    (tmp_path / "labconfig" / "page_config.json").write_text(json.dumps(disabled))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path))
    finding = doctor_checks.check_widgets()
    assert finding.status == "PROBLEM" and "labextension enable" in finding.text, finding


def test_a_jupyterlab_widgets_ipywidgets_does_not_accept_is_a_problem(monkeypatch):
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "1.0.0" if name == "jupyterlab_widgets" else real(name)
    )
    finding = doctor_checks.check_widgets()
    assert finding.status == "PROBLEM" and "1.0.0 is installed" in finding.text, finding


def test_the_kernel_checked_is_the_one_every_notebook_names():
    names = {
        nbformat.read(ROOT / "notebooks" / nb.file, as_version=4).metadata.kernelspec.name for nb in manifest.NOTEBOOKS
    }
    assert names == {doctor_checks.KERNEL_NAME}


def test_an_unknown_kernel_is_a_problem_with_a_fix():
    finding = doctor_checks.check_kernel("labkit-no-such-kernel")
    assert finding.status == "PROBLEM" and "ipykernel install" in finding.text, finding


def _kernelspec(root: Path, name: str, code: str) -> None:
    folder = root / "kernels" / name
    folder.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-c", code, "{connection_file}"], "display_name": name, "language": "python"}
    (folder / "kernel.json").write_text(json.dumps(spec))


@pytest.fixture
def jupyter_dirs(monkeypatch, tmp_path):
    """A kernelspec folder of the test's own, and a runtime folder in which a kernel's connection file would stay."""
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    return tmp_path


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.processes
def test_a_kernel_that_dies_at_start_is_a_problem_and_leaves_nothing_behind(jupyter_dirs):
    _kernelspec(jupyter_dirs, "dies", "import sys; print('cannot load the kernel library'); sys.exit(3)")
    before = _children()
    finding = doctor_checks.check_kernel("dies", timeout_s=30)
    assert finding.status == "PROBLEM" and "did not start" in finding.text, finding
    assert "it printed: cannot load the kernel library" in finding.text
    assert _children() <= before
    assert not any((jupyter_dirs / "runtime").glob("kernel-*.json"))


@pytest.mark.processes
def test_a_kernel_that_never_answers_is_stopped_at_the_time_out(jupyter_dirs):
    _kernelspec(jupyter_dirs, "hangs", "import time; time.sleep(120)")
    before = _children()
    finding = doctor_checks.check_kernel("hangs", timeout_s=1)
    assert finding.status == "PROBLEM" and "within 1 s" in finding.text, finding
    assert _children() <= before, "the kernel that never answered must be killed and reaped"
    assert not any((jupyter_dirs / "runtime").glob("kernel-*.json"))


def test_the_notebooks_that_need_a_process_group_are_the_ones_that_launch_workers():
    launching = []
    for nb in manifest.NOTEBOOKS:
        cells = nbformat.read(ROOT / "notebooks" / nb.file, as_version=4).cells
        if any("distributed.launch(" in c.source for c in cells if c.cell_type == "code"):
            launching.append(nb.slug)
    assert doctor_checks.NEED_PROCESS_GROUP == tuple(launching)


def test_a_port_that_cannot_be_bound_is_a_problem_with_a_fix(monkeypatch):
    monkeypatch.setattr(distributed, "HOST", "192.0.2.1")  # TEST-NET-1: never an address of this machine
    before = _children()
    result = group_check.loopback_group()
    assert result["ok"] is False and result["kind"] == "bind" and "OSError" in result["error"], result
    assert _children() <= before
    finding = doctor_checks.group_finding(result, result["seconds"])
    assert finding.status == "PROBLEM" and "cannot listen on a port of 127.0.0.1 (OSError" in finding.text, finding
    assert "firewall" in finding.text and "`multiple_gpus`" in finding.text


def test_a_group_that_cannot_form_is_a_problem_that_quotes_the_launchers_reason(monkeypatch):
    """What the launcher says when a worker fails or the rendezvous times out reaches the learner, with a fix.

    (That the launcher stops its workers and frees its port on that path is tests/test_distributed.py's.)
    """
    reason = "rank 1 of 2 exited with code 1 after 20.1 s: DistNetworkError: timed out; every other worker was stopped"

    def refused(*args, **kwargs):
        raise DistributedRunError(reason, port=12345)

    monkeypatch.setattr(distributed, "launch", refused)
    result = group_check.loopback_group()
    assert result["ok"] is False and result["kind"] == "group" and result["error"] == reason
    finding = doctor_checks.group_finding(json.loads(json.dumps(result)), 1.0)  # as it travels: one JSON line
    assert finding.status == "PROBLEM" and f"could not form a gloo group on 127.0.0.1: {reason}" in finding.text
    assert "firewall" in finding.text


def test_a_group_check_that_passes_is_one_ok_line():
    finding = doctor_checks.group_finding({"ok": True, "kind": None, "error": None, "seconds": 2.0}, 3.25)
    assert finding.line().startswith(
        "  ok       processes two processes formed a gloo group on 127.0.0.1 and all-reduced"
    )
    assert "(3.2 s)" in finding.text


@pytest.mark.processes
def test_a_group_check_past_its_deadline_is_stopped_with_everything_it_started():
    before = _children()
    finding = doctor_checks.check_process_group(deadline_s=0.5)  # too short for its Python even to import PyTorch
    assert finding.status == "PROBLEM" and "did not finish within 0.5 s and was stopped" in finding.text, finding
    assert _children() <= before


def test_warnings_are_caught_and_each_said_in_one_plain_line(capsys):
    with doctor.caught_warnings() as caught:
        logging.getLogger("torch.utils._pytree").warning(
            "<enum 'KernelPreference'> is an Enum subclass and is now natively supported by torch.compile as an "
            "opaque value type. Calling register_constant() on Enum subclasses is deprecated"
        )
        logging.getLogger("torch.utils.cpp_extension").warning("No CUDA runtime is found, using CUDA_HOME='/usr'")
        for spread in (23, 42):
            warnings.warn(
                f"matmul 1024x1024: IQR is {spread}% of the median over 14 blocks; ...",
                NoisyMeasurementWarning,
                stacklevel=1,
            )
        warnings.warn("something odd in /some/where/lib.py\nsecond line", UserWarning, stacklevel=1)
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == ""
    lines = [finding.line() for finding in doctor.explain(caught)]
    assert len(lines) == 4, lines
    assert "2 measurement(s) spread by 23% to 42% of their median (noisy above 10%)" in lines[0]
    assert "torchao" in lines[1] and "harmless" in lines[1] and "no usable NVIDIA GPU" in lines[2]
    assert lines[3].endswith("a library warned (UserWarning): something odd in /some/where/lib.py; the doctor does not "
                             "know it, and it stops nothing")  # fmt: skip
    assert logging.getLogger("torch").handlers, "PyTorch's own log handler must be given back"


@pytest.mark.processes
def test_command_line_runs_every_check_and_prints_no_raw_warnings():
    """The whole doctor in a fresh process (the torchao warning comes at its first import), as `make doctor` runs it."""
    env = {**os.environ, "LABKIT_DEVICE": "cpu"}
    ok = subprocess.run(
        [sys.executable, "-m", "labkit", "doctor", "--no-ceilings"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for check in ("packages", "device", "cores", "disk", "widgets", "kernel", "processes"):
        assert _line(ok.stdout, check).startswith(f"  ok       {check}"), ok.stdout
    assert ok.stderr == "" and not RAW_WARNING.search(ok.stdout), ok.stdout + ok.stderr


def test_command_line_exit_code_on_a_bad_setting(monkeypatch, capsys):
    from labkit.__main__ import main

    monkeypatch.setenv("LABKIT_DEVICE", "tpu")
    assert main(["doctor", "--no-ceilings"]) == 1
    out = capsys.readouterr().out
    assert "LABKIT_DEVICE='tpu' is not allowed" in out and "allowed: auto, cpu" in out
