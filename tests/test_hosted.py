"""Hosted notebooks (Colab, Binder, JupyterHub): each notebook's install cell, the README's badges, and the T4's
16-bit type. docs/hosted.md says what a learner sees; tools/hosted.py writes the cell and the links from the one
repository address in pyproject.toml."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import hosted
import nbformat
import pytest
import torch
from conftest import NOTEBOOKS, ROOT
from scratch_env import labkit_wheel, scratch_python

from labkit.core import compat
from labkit.instruments import ceilings

# Run before the cell: any process, program or connection it starts ends the run with this message.
NOTHING_STARTS = """
import sys

def _refuse(event, args):
    if event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "socket.connect",
                 "socket.getaddrinfo"):
        raise RuntimeError(f"the cell started something: {event} {args!r:.200}")

sys.addaudithook(_refuse)
"""


def _install_cell(path: Path) -> nbformat.NotebookNode:
    code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    assert code and hosted.TAG in code[0].metadata.get("tags", []), f"{path.name}: its first code cell is not tagged"
    return code[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_opens_its_code_with_the_install_cell_for_the_configured_address(path):
    cell = _install_cell(path)
    address = hosted.repository(ROOT)
    assert cell.source == hosted.cell_source(f"git+{address}"), "run: python tools/render_docs.py"
    assert f'"labkit @ git+{address}"' in cell.source
    assert hosted.BOOK_TAG in cell.metadata["tags"] and cell.metadata["cellView"] == "form"
    assert not cell.outputs and cell.execution_count is None


def test_the_readme_badges_open_start_here_from_the_configured_address():
    readme = (ROOT / "README.md").read_text()
    links = hosted.readme_links("https://github.com/someone/their-fork")
    assert "https://mybinder.org/v2/gh/someone/their-fork/HEAD?labpath=notebooks%2Fstart_here.ipynb" in links
    assert "https://colab.research.google.com/github/someone/their-fork/blob/main/notebooks/start_here.ipynb" in links
    assert hosted.readme_links(hosted.repository(ROOT)) in readme
    assert "OWNER/REPO" not in readme


def test_render_docs_check_fails_when_the_address_changes_and_names_what_is_stale(monkeypatch, capsys):
    """A fork that changes pyproject.toml's address without running render_docs is caught (nothing is written)."""
    import render_docs

    before = {p: p.read_text() for p in [ROOT / "README.md", ROOT / "docs" / "hosted.md", *NOTEBOOKS]}
    monkeypatch.setattr(hosted, "repository", lambda root: "https://github.com/someone/their-fork")
    assert render_docs.main(["--check"], root=ROOT) == 1
    stale = capsys.readouterr().err
    assert "README.md" in stale and "docs/hosted.md" in stale and all(f"notebooks/{p.name}" in stale for p in NOTEBOOKS)
    assert all(p.read_text() == text for p, text in before.items())


def test_a_missing_or_foreign_address_is_a_clear_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "labkit"\n')
    with pytest.raises(SystemExit, match=r"\[project.urls\] Repository must be a GitHub address.*got None"):
        hosted.repository(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project.urls]\nRepository = "https://gitlab.com/a/b"\n')
    with pytest.raises(SystemExit, match=r"https://github.com/OWNER/NAME.*got 'https://gitlab.com/a/b'"):
        hosted.repository(tmp_path)
    with pytest.raises(ValueError, match="one line without quotes"):
        hosted.cell_source('git+https://x"; import os')


def test_rendering_twice_keeps_one_install_cell_and_a_notebook_without_code_is_refused():
    text = (NOTEBOOKS[0]).read_text()
    again = hosted.with_install_cell(text, "https://github.com/someone/their-fork", "x")
    cells = nbformat.reads(again, as_version=4).cells
    assert sum(hosted.TAG in c.metadata.get("tags", []) for c in cells) == 1
    assert "git+https://github.com/someone/their-fork" in next(c for c in cells if c.cell_type == "code").source
    only_text = nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# x")]))
    with pytest.raises(SystemExit, match="no code cell"):
        hosted.with_install_cell(only_text, "https://github.com/a/b", "empty.ipynb")


def _run(python: Path, code: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.processes
def test_the_install_cell_installs_labkit_where_it_is_missing_and_does_nothing_where_it_is_not(tmp_path):
    """The cell's code, pointed at a wheel built from this checkout instead of the repository (pip offline), run
    in a scratch environment that has labkit's dependencies (the test environment's, through a path file) but not
    labkit: it installs labkit, which then imports from there. Where labkit imports already (the scratch
    environment afterwards, and the test environment with its editable labkit) it starts no process at all."""
    wheel = labkit_wheel(tmp_path)
    python, site = scratch_python(tmp_path / "env")  # pip and torch, not labkit
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PIP_NO_INDEX="1", PIP_NO_DEPS="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    cell = hosted.cell_source(wheel.as_uri())
    find = "import importlib.util; print(importlib.util.find_spec('labkit'))"
    assert _run(python, find, tmp_path, env).stdout.strip() == "None", "the scratch environment already has labkit"

    refused = _run(python, NOTHING_STARTS + cell, tmp_path, env)  # the guard catches the cell's pip
    assert refused.returncode != 0 and "the cell started something: subprocess.Popen" in refused.stderr

    missing = (tmp_path / "dist" / "labkit-0.0.0-py3-none-any.whl").as_uri()
    failed = _run(python, hosted.cell_source(missing), tmp_path, env)  # pip's own words, after what was asked
    assert failed.returncode != 0 and f"RuntimeError: pip install 'labkit @ {missing}' failed:" in failed.stderr
    assert "labkit-0.0.0-py3-none-any.whl" in failed.stderr.split("failed:", 1)[1], failed.stderr[-2000:]

    installed = _run(python, cell, tmp_path, env)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    assert "labkit is not installed here: pip install" in installed.stdout
    imported = _run(python, "import labkit; print(labkit.__file__)", tmp_path, env)
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert Path(imported.stdout.strip()).is_relative_to(site), imported.stdout

    for where in (python, Path(sys.executable)):  # now installed here; always installed in the test environment
        quiet = _run(where, NOTHING_STARTS + cell, tmp_path, env)
        assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", ""), (where, quiet.stderr[-2000:])


def _gpu(monkeypatch, major: int, minor: int, emulates_bf16: bool = True) -> None:
    """Make PyTorch see one CUDA GPU of compute capability ``major.minor`` (nothing else is asked of it)."""
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: SimpleNamespace(major=major,
                                                                                                 minor=minor))  # fmt: skip
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, minor))
    monkeypatch.setattr(torch.cuda, "_check_bf16_tensor_supported", lambda device: emulates_bf16)


def test_a_t4_gets_fp16_though_pytorch_calls_its_emulated_bf16_supported(monkeypatch):
    """Colab's T4 (compute capability 7.5) has no bf16 units; PyTorch's is_bf16_supported() counts emulation."""
    _gpu(monkeypatch, 7, 5)
    assert torch.cuda.is_bf16_supported(), "PyTorch no longer counts emulated bf16: docs/hosted.md says it does"
    assert not torch.cuda.is_bf16_supported(including_emulation=False)
    assert not compat.native_bf16("cuda")
    assert ceilings.low_precision_dtype("cuda") == torch.float16


@pytest.mark.parametrize(
    "major, minor, expected", [(7, 0, torch.float16), (8, 0, torch.bfloat16), (9, 0, torch.bfloat16)]
)
def test_the_16_bit_type_follows_the_compute_capability(monkeypatch, major, minor, expected):
    """V100 (7.0): fp16; A100 (8.0), H100 (9.0): bf16; also with a PyTorch whose is_bf16_supported takes no
    argument (before 2.3), where labkit reads the capability itself."""
    _gpu(monkeypatch, major, minor)
    assert ceilings.low_precision_dtype("cuda") == expected
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)  # the old signature: emulation counted
    assert ceilings.low_precision_dtype("cuda") == expected
