"""tools/build_book.py: the suite as a static site, built from executed notebooks (the browser view: test_browser.py)."""

import html
import re
from pathlib import Path

import build_book
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from test_report import GOOD

from labkit.lab import manifest

ROOT = Path(__file__).resolve().parents[1]
PROSE = """## 1 · Read on

The next notebook is [the other one](01_other.ipynb); for a job of size $n$, at $3 an hour, the time is

$$t = a + b\\,n$$

<details><summary>Solution</summary>

The answer is 42.

</details>"""


def notebook(path, body, title):
    params = new_code_cell('PROFILE = "auto"')
    params.metadata["tags"] = ["parameters"]
    intro = new_markdown_cell(f"# {title}\n\n**The question.** Why is `x` so slow? More words.\n\n**Time:** 1 s.")
    nb = new_notebook(cells=[intro, params, new_code_cell(body), new_markdown_cell(PROSE)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def make_book(tmp_path, broken=False):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    notebook(nbdir / "00_good.ipynb", GOOD, "00 · Good")
    checked = "# NBVAL_CHECK_OUTPUT\nprint('fine')"  # a test marker, as the notebooks' deterministic cells carry
    notebook(nbdir / "01_other.ipynb", "raise RuntimeError('deliberate')" if broken else checked, "01 · Other")
    code = build_book.build(nbdir, tmp_path / "book", tmp_path / "src", "quick")
    return code, tmp_path / "book"


@pytest.mark.processes
def test_the_book_is_every_executed_notebook_with_its_run_line_and_opens_offline(tmp_path, capsys):
    code, site = make_book(tmp_path)
    assert code == 0, capsys.readouterr().out
    index = (site / "index.html").read_text()
    assert 'href="00_good.html"' in index and 'href="01_other.html"' in index and "Why is" in index
    page = (site / "00_good.html").read_text()
    assert "Measured on this run" in page and "1 timing claims: 1 hold, 0 undecided, 0 contradicted" in page
    assert 'href="01_other.html"' in page, "a link to another notebook is a link to its page"
    assert re.search(r"<img [^>]*src=\"_images/[^\"]+\.png\"", page), "the plot is an image file of the site"
    assert "<details>" in page and "<details open" not in page, "a solution stays folded"
    assert "_static/mathjax/MathJax.js" in page, "math is typeset by the MathJax copied into the site"
    assert "Machine card" not in page and "cpu" in (site / "machine.html").read_text()
    assert build_book._offline_problems(site) == []
    other = html.unescape(re.sub(r"<[^>]+>", "", (site / "01_other.html").read_text()))  # the text a reader sees
    assert "fine" in other and 'PROFILE = "auto"' in other, "the notebook's own cells and outputs stay"
    assert "NBVAL" not in page + other, "the test suite's markers are not part of the lesson"
    assert "# Parameters" not in other and 'PROFILE = "quick"' not in other, "papermill's cell is hidden"
    assert "book.css" in page and "white-space: pre-wrap" in (site / "_static" / "book.css").read_text()
    again = build_book.build(tmp_path / "notebooks", site, tmp_path / "src", "quick", only=["01_other"])
    assert again == 0 and capsys.readouterr().out.count("executed copy is current, reused") == 1
    assert (site / "01_other.html").exists() and not (site / "00_good.html").exists(), "--only: those pages only"


def test_a_page_leaves_out_papermills_cell_and_the_test_markers_and_keeps_the_rest():
    source = "# NBVAL_CHECK_OUTPUT\nprint(2 + 2)  # 4\n  #  NBVAL_SKIP  (reason)\nx = 1"
    nb = {"cells": [
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ['PROFILE = "auto"']},
        {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": '# Parameters\nPROFILE = "quick"'},
        {"cell_type": "code", "metadata": {}, "source": source.splitlines(keepends=True)},
        {"cell_type": "markdown", "metadata": {}, "source": "Cells marked `# NBVAL_CHECK_OUTPUT` hold counts."},
    ]}  # fmt: skip
    cells = build_book._for_readers(nb)["cells"]
    assert [c["metadata"].get("tags") for c in cells] == [["parameters"], None, None]
    assert cells[1]["source"] == "print(2 + 2)  # 4\nx = 1" and "NBVAL" in cells[2]["source"]  # prose is kept


def test_only_names_notebooks_that_exist(tmp_path, capsys):
    (tmp_path / "start_here.ipynb").write_text("{}")
    with pytest.raises(SystemExit) as stop:
        build_book.main(["--notebooks", str(tmp_path), "--out", str(tmp_path / "b"), "--only", "strat_here"])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and "no notebook strat_here in" in error and "the notebooks are: start_here" in error
    assert not (tmp_path / "b").exists(), "nothing is built"


@pytest.mark.processes
def test_a_broken_notebook_fails_the_build_with_its_name(tmp_path, capsys):
    code, site = make_book(tmp_path, broken=True)
    out = capsys.readouterr().out
    assert code == 1 and "book: FAILED: 01_other did not run to the end" in out
    page = (site / "01_other.html").read_text()
    assert "This notebook failed on this run" in page and "deliberate" in page


@pytest.mark.processes
def test_the_books_index_lists_every_notebook_in_teaching_order_and_every_link_resolves(tmp_path):
    assert build_book.build(ROOT / "notebooks", tmp_path / "book", tmp_path / "src", execute_notebooks=False) == 0
    site = tmp_path / "book"
    index = (site / "index.html").read_text()
    listed = re.findall(r'<a class="reference internal" href="([a-z_]+)\.html">', index.split("bd-article")[-1])
    assert [s for s in dict.fromkeys(listed) if s != "machine"] == manifest.slugs()
    broken = {
        (page.name, href)
        for page in site.glob("*.html")
        for href in re.findall(r'href="([a-z_]+\.html)(?:#[^"]*)?"', page.read_text())
        if not (site / href).exists()
    }
    assert not broken, f"links to pages that do not exist: {sorted(broken)}"
    assert not re.search(r'href="[a-z_]+\.ipynb', index + (site / "start_here.html").read_text())


@pytest.mark.processes
def test_a_book_page_shows_the_reference_gpu_results_shipped_for_its_notebook(tmp_path, capsys):
    """The "On a real GPU" section, executed as the book executes it (away from the checkout's folder), shows the
    records shipped in results/reference/ beside the learner's numbers, not "none recorded"."""
    shipped = sorted((ROOT / "results" / "reference").glob("*/start_here.json"))
    assert shipped, "a reference record for start_here ships with the course"
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    body = (
        "import labkit\n"
        'lab = labkit.start("start_here", "quick", "cpu", show=False)\n'
        "lab.references(lambda ref: print(f\"  reference bf16 {ref['summary']['low_precision_gflops']:,.0f} GFLOP/s\"))"
    )
    notebook(nbdir / "start_here.ipynb", body, "Start here")
    assert build_book.build(nbdir, tmp_path / "book", tmp_path / "src", "quick") == 0, capsys.readouterr().out
    page = (tmp_path / "book" / "start_here.html").read_text()
    for path in shipped:
        assert str(path.relative_to(ROOT)) in page
    assert "NVIDIA H200" in page and "reference bf16" in page and "No reference GPU results" not in page
