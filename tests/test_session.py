"""labkit.start: the one set-up call, and a quiet import (notebook `start_here`)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import labkit
from labkit.lab import session

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _python(code: str, **env) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base, timeout=180)


@pytest.mark.processes
def test_importing_labkit_changes_nothing_and_start_applies_the_settings():
    code = """
import json, logging, os
import matplotlib as mpl, matplotlib.pyplot as plt
import torch
before = dict(env=dict(os.environ), rc=dict(mpl.rcParams), show=plt.show, threads=torch.get_num_threads(),
              log=logging.getLogger("torch.utils.cpp_extension").level)
import labkit
from labkit.core import allocator
after = dict(env=dict(os.environ), rc=dict(mpl.rcParams), show=plt.show, threads=torch.get_num_threads(),
             log=logging.getLogger("torch.utils.cpp_extension").level)
changed = sorted(k for k in before if before[k] != after[k]) + (["allocator"] if allocator.applied else [])
lab = labkit.start("start_here", "quick", "cpu", show=False)
print(json.dumps(dict(changed=changed, threads=torch.get_num_threads(), lab_threads=lab.threads,
                      style=mpl.rcParams["axes.spines.top"] is False, audited=getattr(plt.show, "labkit_audited", False),
                      kineto=os.environ.get("KINETO_LOG_LEVEL"), card_threads=lab.card["torch_threads"])))
"""
    run = _python(code, LABKIT_AUDIT_PLOTS="1", LABKIT_THREADS="1")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["changed"] == [], f"import labkit changed {out['changed']}"
    assert out["threads"] == out["lab_threads"] == out["card_threads"] == 1
    assert out["style"] and out["audited"] and out["kineto"] == "6"


def test_the_course_leaves_one_core_free(monkeypatch):
    monkeypatch.delenv(session.THREADS_ENV, raising=False)
    monkeypatch.setattr(session, "usable_cores", lambda: 8)
    assert session.default_threads() == 7
    monkeypatch.setattr(session, "usable_cores", lambda: 1)
    assert session.default_threads() == 1
    monkeypatch.setenv(session.THREADS_ENV, "3")
    assert session.default_threads() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(session.THREADS_ENV, bad)
        with pytest.raises(ValueError, match="LABKIT_THREADS=.* is not allowed; allowed: a whole number"):
            session.default_threads()


def test_start_sets_threads_and_names_the_notebook_once(monkeypatch, capsys):
    saved = torch.get_num_threads()
    try:
        lab = labkit.start("batch_size", "quick", "cpu", threads=1)
        assert torch.get_num_threads() == 1 and lab.threads == 1
        assert lab.name == lab.log.notebook == lab.cfg.notebook == "batch_size"
        assert lab.profile == "quick" and lab.device == torch.device("cpu")
        assert "1 thread," in capsys.readouterr().out
        with pytest.raises(KeyError, match="no notebook called .99_nothing.; the notebooks are: start_here, "):
            labkit.start("99_nothing", "quick", "cpu", threads=2)
        assert torch.get_num_threads() == 1, "a bad name fails before anything is changed"
        with pytest.raises(ValueError, match="whole number"):
            labkit.start("batch_size", "quick", "cpu", threads=0)
    finally:
        torch.set_num_threads(saved)


def test_threads_restores_the_count_even_on_error():
    saved = torch.get_num_threads()
    with pytest.raises(RuntimeError), labkit.threads(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError("inside")
    assert torch.get_num_threads() == saved
    with pytest.raises(ValueError, match="1 or more"), labkit.threads(0):
        pass


def test_references_say_when_none_are_recorded(monkeypatch, capsys):
    lab = labkit.start("batch_size", "quick", "cpu", threads=torch.get_num_threads(), show=False)
    from labkit.lab import records

    monkeypatch.setattr(records, "load_reference", lambda name: [])
    assert lab.references(lambda ref: print("never")) == []
    assert "No reference GPU results" in capsys.readouterr().out
    ref = {"card": {"device_name": "NVIDIA H200", "torch": "2.14.1"}, "summary": {"x": 2.0}, "source_file": "f.json"}
    monkeypatch.setattr(records, "load_reference", lambda name: [ref])
    lab.references(lambda r: print(f"x is {r['summary']['x']}"))
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "x is 2.0" in out and "No reference" not in out


@pytest.mark.processes
def test_keeping_freed_memory_keeps_it_in_the_process():
    # A 256 MiB block freed and allocated again: glibc's default maps it fresh from the OS each time (resident
    # memory drops after free), the course's setting keeps it (resident memory stays). The card says which.
    code = """
import ctypes, os, json
from labkit.core import allocator
from labkit.lab import records
applied = allocator.keep_freed_memory() if os.environ.get("APPLY") == "1" else False
page = os.sysconf("SC_PAGE_SIZE")
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
n = 256 << 20
p = libc.malloc(n); ctypes.memset(p, 1, n); held = rss(); libc.free(ctypes.c_void_p(p))
print(json.dumps(dict(applied=applied, kept=(rss() - held + n) / n, card=records.machine_card("cpu")["allocator"])))
"""
    if not sys.platform.startswith("linux"):
        pytest.skip("the allocator setting is glibc's (Linux)")
    tuned = json.loads(_python(code, APPLY="1").stdout.strip().splitlines()[-1])
    plain = json.loads(_python(code, APPLY="0").stdout.strip().splitlines()[-1])
    assert tuned["applied"] and tuned["kept"] > 0.9 and tuned["card"].startswith("glibc, freed memory kept")
    assert not plain["applied"] and plain["kept"] < 0.1 and plain["card"] == "default"


@pytest.mark.processes
def test_measuring_processes_import_no_plotting_or_widgets():
    # A DDP worker runs `python -m labkit.parallel.distributed`, the background trainer `python -m labkit.serving.sharing`: both import
    # the package, and neither needs matplotlib, tqdm's notebook bar or ipywidgets. (PyTorch itself imports plain
    # tqdm, for torch.hub.) The load generator is a script that imports neither labkit nor torch.
    code = (
        "import sys, labkit, labkit.parallel.distributed, labkit.serving.sharing\n"
        "print(sorted(m for m in ('matplotlib', 'tqdm.auto', 'tqdm.notebook', 'ipywidgets') if m in sys.modules))"
    )
    run = _python(code)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "[]"
    loadgen = Path(labkit.__file__).parent / "serving" / "loadgen.py"
    code = (
        "import runpy, sys, tempfile; out = tempfile.mktemp()\n"
        "sys.argv = ['loadgen.py', 'http://127.0.0.1:9', '--features', '1', '--rate', '50', '--requests', '2',\n"
        "            '--max-seconds', '1', '--out', out]\n"
        f"try:\n    runpy.run_path({str(loadgen)!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'labkit', 'procs') if m in sys.modules))"
    )
    run = _python(code)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "['procs']", "the load generator imports labkit/core/procs.py only"
