"""The manifest is the one place that knows the notebooks' order: inserting a notebook touches nothing else."""

import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from labkit.lab import manifest

DUMMY = "a_dummy_lesson"


def test_entry_names_the_known_notebooks_when_asked_for_an_unknown_one():
    assert manifest.entry("memory").file == "memory.ipynb"
    with pytest.raises(KeyError, match=r"no notebook called '04_memory'; the notebooks are: start_here, "):
        manifest.entry("04_memory")


@pytest.mark.parametrize("slug", ["Batch", "04_memory", "batch-size", ""])
def test_a_slug_is_lower_case_letters_digits_and_underscores(slug):
    with pytest.raises(ValueError, match="a slug is lower-case letters, digits and underscores"):
        manifest.Notebook(slug, "t", "q", "topics", "gpu")


def test_files_sort_in_teaching_order_and_strays_after(tmp_path):
    names = ["where_time_goes.ipynb", "zz_stray.ipynb", "start_here.ipynb", "a_stray.ipynb", "memory.ipynb"]
    assert [p for p in sorted(names, key=manifest.sort_key)] == [
        "start_here.ipynb", "memory.ipynb", "where_time_goes.ipynb", "a_stray.ipynb", "zz_stray.ipynb",
    ]  # fmt: skip
    with pytest.raises(FileNotFoundError, match="start_here.ipynb"):
        manifest.paths(tmp_path)


def _regions_removed(text: str) -> str:
    """A generated document without its generated regions (what a person writes in it)."""
    return re.sub(r"<!-- begin (.*?):.*?-->\n.*?\n<!-- end \1 -->", "", text, flags=re.S)


def _dummy_notebook(path):
    opening = new_markdown_cell(
        "# A dummy lesson\n\n**The question.** Does inserting a notebook touch anything but the manifest?\n\n"
        "**You will be able to**\n- insert a notebook;\n- render the docs;\n- see nothing else change.\n\n"
        "**Time:** a second.\n**Hardware:** any."
    )
    params = new_code_cell('PROFILE = "auto"\nDEVICE = "auto"')
    params.metadata["tags"] = ["parameters"]
    start = new_code_cell(f'import labkit\n\nlab = labkit.start("{DUMMY}", PROFILE, DEVICE)\nprint(lab.cfg.notebook)')
    nbformat.write(new_notebook(cells=[opening, params, start]), path)


@pytest.mark.processes
def test_inserting_a_notebook_touches_only_the_manifest_and_the_new_notebook(root, tmp_path):
    """Insert a dummy notebook fifth in a copy of the project: add its manifest entry and its file, render the docs,
    and the checks that span every notebook (structure, docs, docstrings, sizes, answer keys, the report's order)
    pass with nothing else edited by hand."""
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    copy = tmp_path / "project"
    for rel in tracked:
        if (root / rel).is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, copy / rel)
    before = {rel: (copy / rel).read_bytes() for rel in tracked if (copy / rel).is_file()}

    source = (copy / "labkit" / "lab" / "manifest.py").read_text()
    entry = (
        f'    Notebook(\n        slug="{DUMMY}",\n        title="A dummy lesson",\n        question="Does it fit?",\n'
        '        topics="nothing but the manifest",\n        gpu_adds="nothing",\n    ),\n'
    )
    anchor = '    Notebook(\n        slug="memory",'
    (copy / "labkit" / "lab" / "manifest.py").write_text(source.replace(anchor, entry + anchor, 1))
    _dummy_notebook(copy / "notebooks" / f"{DUMMY}.ipynb")

    env = dict(os.environ, PYTHONPATH=str(copy), LABKIT_PROFILE="quick", LABKIT_HEADLESS="1")
    run = dict(cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    rendered = subprocess.run([sys.executable, "tools/render_docs.py"], **run)
    assert rendered.returncode == 0, rendered.stderr
    order = subprocess.run(
        [
            sys.executable,
            "-c",
            "import labkit; from labkit.lab import manifest; print(labkit.__file__); "
            "print(*[p.stem for p in manifest.paths('notebooks')])",
        ],  # fmt: skip
        **run,
    )
    file, slugs = order.stdout.splitlines()
    assert file.startswith(str(copy)), "the copy's labkit is the one imported"
    assert slugs.split()[3:6] == ["model_size", DUMMY, "memory"]
    checks = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            f"not {DUMMY}",
            "tests/test_notebook_structure.py",
            "tests/test_docstrings.py",
            "tests/test_sizes.py",
            "tests/test_report.py",
            "-m",
            "not processes",
        ],  # fmt: skip
        **run,
    )
    assert checks.returncode == 0, checks.stdout[-3000:]
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            "import nbformat; nb = nbformat.read('notebooks/" + DUMMY + ".ipynb', 4); "
            "exec('\\n'.join(c.source for c in nb.cells if c.cell_type == 'code'))",
        ],  # fmt: skip
        **run,
    )
    assert ran.returncode == 0 and ran.stdout.strip().endswith(DUMMY), ran.stderr

    after = {rel: (copy / rel).read_bytes() for rel in before}
    edited = sorted(rel for rel in before if after[rel] != before[rel])
    assert edited == ["README.md", "docs/hosted.md", "docs/instructor.md", "labkit/lab/manifest.py"]
    for rel in ("README.md", "docs/hosted.md", "docs/instructor.md"):  # only inside their generated regions
        assert _regions_removed(after[rel].decode()) == _regions_removed(before[rel].decode())
    readme = after["README.md"].decode()
    assert f"| 04 | [`{DUMMY}`](notebooks/{DUMMY}.ipynb) | Does it fit? (nothing but the manifest) |" in readme
    assert "| 05 | [`memory`](notebooks/memory.ipynb) |" in readme
    assert "### A dummy lesson" in after["docs/instructor.md"].decode()
