"""Build the suite as a book: every notebook executed, rendered as a static site that opens offline.

    python tools/build_book.py                        # quick profile: build/book/index.html
    python tools/build_book.py --profile full         # on a GPU
    python tools/build_book.py --no-execute           # render the notebooks as they are stored (no outputs)
    python tools/build_book.py --only start_here memory   # those notebooks only (a quick look at a page)

Each notebook is executed with papermill (``labkit.lab.report.run_notebook``, as ``make report`` runs it: the
learner's notebook, exercises unsolved, the profile injected) into ``build/book-src/``; an executed copy newer
than its notebook, from a run that succeeded in the same profile, is reused. Sphinx with MyST-NB then renders
the executed notebooks without running them again, in the manifest's teaching order, each page opening with
its question and time (the notebook's own first cell) and a line saying where and how it ran and its claims'
verdicts; a page "This run's machine" shows the machine card; the reference GPUs' results are in each page's
outputs, beside this run's (the notebooks print them). Solutions stay folded (``<details>``); the answer keys
live in labkit and are never printed. What only the tests read is left out of the pages: papermill's cell of
injected parameters and the test suite's comment lines (``# NBVAL_CHECK_OUTPUT``). The pages' stylesheet
(``book.css``) widens the column so that a line of 110 characters (the notebooks' ruff width) fits beside the
navigation on a 1280-pixel laptop screen, and wraps long output lines, so a verdict reads whole on a phone.

Sphinx + MyST-NB rather than Jupyter Book 2: Jupyter Book 2 (mystmd) fetches its site theme from the network
when it builds, and this must build where only the package registries are reachable, and open where nothing is.
Every asset Sphinx and the theme need is installed with them; the build refuses a page that loads anything
from elsewhere.

A notebook that fails makes the build fail, naming it (its page is still written, with the traceback).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import own_checkout  # noqa: E402, F401  (before labkit: this checkout's labkit, or a clear stop)

# isort: split
from labkit.claims.verdicts import CONTRADICTED, HOLDS, UNDECIDED  # noqa: E402
from labkit.lab import manifest  # noqa: E402
from labkit.lab.records import card_line  # noqa: E402
from labkit.lab.report import run_notebook  # noqa: E402

CONF = """\
project = "AI Workload Lab"
author = "AI Workload Lab"
extensions = ["myst_nb"]
html_theme = "sphinx_book_theme"
html_title = "AI Workload Lab"
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    # the page's sections go under the notebooks in the left sidebar, and the right one goes: its width is the
    # column's, and a notebook's lines are 110 characters (notebooks/ruff.toml)
    "secondary_sidebar_items": [],
}
html_sidebars = {"**": ["navbar-logo.html", "search-button-field.html", "sbt-sidebar-nav.html", "page-toc.html"]}
html_css_files = ["book.css"]  # the column as wide as the page allows, outputs wrapped (BOOK_CSS)
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
nb_execution_mode = "off"  # tools/build_book.py executed every notebook already
nb_ipywidgets_js = {}  # widget state is not kept (the runs are headless): no widget script from a CDN
myst_enable_extensions = ["dollarmath", "html_image"]
myst_dmath_allow_digits = False  # "$3 an hour and $5 a day" is money, not math
myst_dmath_allow_space = False
# MathJax from the installed jupyter-server-mathjax, copied beside the pages: Sphinx's default is a CDN
html_static_path = ["_static"]
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
# the package ships the STIX-Web fonts only (as Jupyter's own MathJax set-up uses them)
# (MathJax 2: what myst-nb marks for typesetting is told to it in MathJax 2's own terms)
myst_update_mathjax = False
mathjax2_config = {
    "HTML-CSS": {"availableFonts": [], "preferredFont": None, "webFont": "STIX-Web", "imageFont": None},
    "tex2jax": {"processClass": "tex2jax_process|mathjax_process|math|output_area", "ignoreClass": "tex2jax_ignore"},
}
exclude_patterns = ["_build", "results", "runs.json"]
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type", "misc.highlighting_failure"]
"""

BOOK_CSS = """\
/* Written by tools/build_book.py. */
/* No right sidebar (its "on this page" is in the left one), so the article takes the width that is left. */
.bd-main .bd-content .bd-article-container { max-width: 100%; }
@media (min-width: 1200px) {
  .bd-main .bd-content .bd-article-container .bd-article { padding-left: 1.5rem; padding-right: 1.5rem; }
}
.bd-sidebar-primary .page-toc { margin-top: 1rem; font-size: 0.9em; }
.secondary-toggle { display: none !important; }  /* its button would open an empty panel */
/* An output line wraps instead of scrolling: a verdict's last word ("holds", "CONTRADICTED", "undecided")
   is at the end of a long line, and a phone would hide it. Code keeps its lines (they are Python). */
div.cell_output pre, div.output pre { white-space: pre-wrap; overflow-wrap: anywhere; }
"""


def _order(notebooks_dir: Path) -> list[Path]:
    return sorted(notebooks_dir.glob("*.ipynb"), key=manifest.sort_key)


def _opening(path: Path) -> tuple[str, str]:
    """The notebook's title (its first heading) and its question (the first sentence after "The question.")."""
    cells = json.loads(path.read_text())["cells"]
    first = "".join(cells[0]["source"]) if cells else ""
    title = re.search(r"^#\s+(.+)$", first, flags=re.M)
    question = re.search(r"\*\*The question\.\*\*\s*(.+?[.?])(\s|$)", first, flags=re.S)
    return (title.group(1).strip() if title else path.stem), (" ".join(question.group(1).split()) if question else "")


def execute(paths: list[Path], src: Path, profile: str, timeout_s: int) -> list[dict]:
    """Run each notebook into ``src`` (reusing a fresh, successful copy); return one run record per notebook."""
    runs_file = src / "runs.json"
    before = {r["notebook"]: r for r in json.loads(runs_file.read_text())} if runs_file.exists() else {}
    results = src / "results"
    runs = []
    for path in paths:
        out = src / path.name
        old = before.get(path.stem)
        fresh = out.exists() and out.stat().st_mtime > path.stat().st_mtime
        if fresh and old and old["status"] == "ok" and old.get("profile") == profile:
            print(f"book: {path.name}: executed copy is current, reused", flush=True)
            runs.append(old)
            continue
        print(f"book: running {path.name} (profile {profile}) ...", flush=True)
        run = run_notebook(path, out, profile=profile, results_dir=results, timeout_s=timeout_s)
        run["profile"] = profile
        print(f"book:   {run['status']} in {run['wall_s']:.1f} s" + (f": {run['error']}" if run["error"] else ""))
        runs.append(run)
        runs_file.write_text(json.dumps(runs, indent=1))  # as it goes: an interrupted build keeps what it ran
    runs_file.write_text(json.dumps(runs, indent=1))
    return runs


def _verdict_line(record: dict | None, run: dict | None) -> str:
    if run is not None and run["status"] != "ok":
        return f"**This notebook failed on this run:** `{run['error']}`. Its outputs below stop at the failing cell."
    if record is None:
        return "This page shows the notebook as stored, not executed."
    claims = record.get("claims", [])
    counts = {v: sum(c.get("verdict") == v for c in claims) for v in (HOLDS, UNDECIDED, CONTRADICTED)}
    card = record.get("card", {})
    ran = f" in {run['wall_s']:.0f} s" if run else ""
    told = (
        f"{len(claims)} timing claims: {counts[HOLDS]} hold, {counts[UNDECIDED]} undecided, "
        f"{counts[CONTRADICTED]} contradicted"
        if claims
        else "no timing claims"
    )
    return (
        f"**Measured on this run**{ran}, on {card_line(card)} "
        f"([this run's machine](machine.md)). {told}; each verdict is printed where the claim is decided."
    )


# A comment line that only the test suite reads (nbval's markers), e.g. "# NBVAL_CHECK_OUTPUT"
TEST_MARKER = re.compile(r"^[ \t]*#[ \t]*NBVAL_[A-Z_]+[^\n]*(?:\n|$)", re.M)
INJECTED_TAG = "injected-parameters"  # papermill's tag on the cell of parameters it adds


def _for_readers(nb: dict) -> dict:
    """The notebook as a reader of the book sees it: without papermill's injected cell and the test markers."""
    cells = [c for c in nb["cells"] if INJECTED_TAG not in c.get("metadata", {}).get("tags", [])]
    for cell in cells:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = TEST_MARKER.sub("", source)
    return dict(nb, cells=cells)


def _annotate(page: Path, line: str) -> None:
    """Put ``line`` right after the notebook's first cell (its title, question and time)."""
    nb = _for_readers(json.loads(page.read_text()))
    cell = {"cell_type": "markdown", "id": "book-run", "metadata": {"tags": ["book-run"]}, "source": [line]}
    nb["cells"].insert(1, cell)
    page.write_text(json.dumps(nb, indent=1, ensure_ascii=False))


def _machine_page(records: dict[str, dict], runs: list[dict]) -> str:
    rows = ["# This run's machine", ""]
    cards = {json.dumps(r.get("card", {}), sort_keys=True): r.get("card", {}) for r in records.values()}
    if not cards:
        return "\n".join([*rows, "No notebook of this build recorded a machine card (they were not executed)."])
    rows += ["Every page of this book was executed on this machine, in the profile given; the numbers on it are",
             "this machine's, and each notebook prints the reference GPUs' results beside them.", ""]  # fmt: skip
    for card in cards.values():
        rows += [f"**{html.escape(card_line(card))}**", "", "| | |", "|---|---|"]
        rows += [f"| {html.escape(str(k))} | {html.escape(str(v))} |" for k, v in card.items()]
        rows.append("")
    rows += ["## Running times", "", "| notebook | status | seconds |", "|---|---|---|"]
    rows += [f"| [{r['notebook']}]({r['notebook']}.ipynb) | {r['status']} | {r['wall_s']:.0f} |" for r in runs]
    return "\n".join(rows) + "\n"


def _index(paths: list[Path], src: Path) -> str:
    lines = [
        "# AI Workload Lab",
        "",
        "Why AI jobs take seconds, minutes or days, measured: every notebook of the suite, executed, in teaching",
        "order. Each page opens with its question and how long it takes; every claim on it was measured on the",
        "machine named at its top ([this run's machine](machine.md)) and decided as a statistic. To run them",
        "yourself, clone the repository and `make lab`.",
        "",
        "| | notebook | the question |",
        "|---|---|---|",
    ]
    known = {e.slug: e for e in manifest.NOTEBOOKS}
    for i, path in enumerate(paths):
        title, question = _opening(src / path.name)
        entry = known.get(path.stem)
        question = entry.question if entry else question
        lines.append(f"| {i:02d} | [{title}]({path.stem}.ipynb) | {question.replace('|', '/')} |")
    lines += ["", "```{toctree}", ":hidden:", ":maxdepth: 1", "", *[p.stem for p in paths], "machine", "```", ""]
    return "\n".join(lines)


def _offline_problems(site: Path) -> list[str]:
    """Pages that would fetch something from the network at view time."""
    pattern = re.compile(r"<(?:script|link|img|iframe)\b[^>]*(?:src|href)=['\"](?:https?:)?//", re.I)
    return [str(p.relative_to(site)) for p in site.rglob("*.html") if pattern.search(p.read_text(errors="replace"))]


def build(
    notebooks_dir: Path = ROOT / "notebooks",
    out: Path = ROOT / "build" / "book",
    src: Path = ROOT / "build" / "book-src",
    profile: str = "quick",
    execute_notebooks: bool = True,
    timeout_s: int = 600,
    only: list[str] | None = None,
) -> int:
    """Build the book into ``out``; 0 if every notebook ran and the site built. ``only``: those notebooks' slugs."""
    started = time.perf_counter()
    paths = _order(notebooks_dir)
    if not paths:
        print(f"book: no notebooks in {notebooks_dir}")
        return 1
    if only is not None:
        unknown = sorted(set(only) - {p.stem for p in paths})
        if unknown or not only:
            raise ValueError(
                f"no notebook {', '.join(unknown) or '(none given)'} in {notebooks_dir}; "
                f"the notebooks are: {', '.join(p.stem for p in paths)}"
            )
        paths = [p for p in paths if p.stem in only]
    src.mkdir(parents=True, exist_ok=True)
    runs = execute(paths, src, profile, timeout_s) if execute_notebooks else []
    if not execute_notebooks:
        for path in paths:
            shutil.copyfile(path, src / path.name)
    by_name = {r["notebook"]: r for r in runs}
    records = {}
    for path in paths:
        record_file = src / "results" / f"{path.stem}.json"
        if path.stem in by_name and by_name[path.stem]["status"] == "ok" and record_file.exists():
            records[path.stem] = json.loads(record_file.read_text())
    pages = src / "pages"
    shutil.rmtree(pages, ignore_errors=True)
    pages.mkdir()
    for path in paths:
        shutil.copyfile(src / path.name, pages / path.name)
        _annotate(pages / path.name, _verdict_line(records.get(path.stem), by_name.get(path.stem)))
    (pages / "conf.py").write_text(CONF)
    (pages / "_static").mkdir()
    (pages / "_static" / "book.css").write_text(BOOK_CSS)
    _copy_mathjax(pages / "_static" / "mathjax")
    (pages / "index.md").write_text(_index(paths, src))
    (pages / "machine.md").write_text(_machine_page(records, runs))
    shutil.rmtree(out, ignore_errors=True)
    sphinx = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "auto", str(pages), str(out)],
        capture_output=True,
        text=True,
    )
    if sphinx.returncode != 0:
        print(sphinx.stdout[-3000:], sphinx.stderr[-3000:], sep="\n")
        print("book: Sphinx failed; nothing was published")
        return 1
    online = _offline_problems(out)
    failed = [r["notebook"] for r in runs if r["status"] != "ok"]
    print(f"book: wrote {out / 'index.html'} ({len(paths)} notebooks) in {time.perf_counter() - started:.0f} s")
    if online:
        print(f"book: these pages would load something from the network: {', '.join(online)}")
    if failed:
        print(f"book: FAILED: {', '.join(failed)} did not run to the end (their pages show where)")
    return 1 if failed or online else 0


def _copy_mathjax(to: Path) -> None:
    """MathJax 2.7, as the jupyter-server-mathjax package installs it (the fonts and the one config used)."""
    import jupyter_server_mathjax

    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    shutil.copytree(static, to, dirs_exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "book")
    parser.add_argument("--src", type=Path, default=ROOT / "build" / "book-src")
    parser.add_argument("--profile", choices=("quick", "full"), default="quick")
    parser.add_argument("--no-execute", action="store_true", help="render the notebooks as stored")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--only", nargs="+", metavar="SLUG", help="only these notebooks (their file names' stems)")
    ns = parser.parse_args(argv)
    try:
        return build(ns.notebooks, ns.out, ns.src, ns.profile, not ns.no_execute, ns.timeout, ns.only)
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    sys.exit(main())
