"""The book's page as a reader sees it on a laptop and on a phone, in headless Chromium (tools/build_book.py).

A page of the book is built from a notebook whose outputs are stored (nothing executed): a code line as long as
notebooks/ruff.toml allows, labkit's verdicts on a long claim, a table. At a laptop's width (1366 and 1280 pixels)
no code or output block scrolls sideways: every line is read whole. At a phone's width (390 pixels) code may
scroll, but each verdict's word (holds / CONTRADICTED / undecided) is on screen without scrolling anything, and the
page itself never scrolls sideways. Screenshots are kept in build/test-artifacts/browser/.
"""

from __future__ import annotations

import tomllib

import build_book
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from test_browser import ARTIFACTS, ROOT

from labkit.claims.verdicts import CONTRADICTED, HOLDS, UNDECIDED, Verdict

pytestmark = pytest.mark.browser

LINE = tomllib.loads((ROOT / "notebooks" / "ruff.toml").read_text())["line-length"]
WORDS = {HOLDS: "holds", CONTRADICTED: "CONTRADICTED", UNDECIDED: "undecided"}
LAPTOPS = [(1366, 768), (1280, 800)]
PHONE = (390, 844)

# Every code and output block of the article, and each of them that scrolls sideways.
_OVERFLOWING = """() => Array.from(document.querySelectorAll('article div.highlight pre, article div.cell_output pre'))
    .map(b => ({width: b.clientWidth, needs: b.scrollWidth, text: b.textContent.slice(0, 60)}))"""
# Where each verdict word is drawn: its box, and whether the block holding it scrolls sideways.
_WORDS = """(words) => {
  const found = [];
  for (const pre of document.querySelectorAll('article div.cell_output pre')) {
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of words) {
        for (let at = node.data.indexOf(word); at >= 0; at = node.data.indexOf(word, at + 1)) {
          const range = document.createRange();
          range.setStart(node, at);
          range.setEnd(node, at + word.length);
          const box = range.getBoundingClientRect();
          found.push({word, left: box.left, right: box.right, scrolls: pre.scrollWidth > pre.clientWidth + 1});
        }
      }
    }
  }
  return found;
}"""


def _verdict(verdict: str) -> Verdict:
    """A verdict on a claim as long as the notebooks' longest, printed as labkit prints it."""
    return Verdict(
        statement="tall-skinny matmul does not beat the roofline (measured / predicted time; 0.4 allows for "
        "write-allocate)",
        expect="between 0.8 and 1.25",
        verdict=verdict,  # type: ignore[arg-type]
        estimate=1.44,
        low=1.43,
        high=1.86,
        confidence=0.95,
        rounds=16,
        seconds=3.0,
        stats={"a": 1.0, "b": 1.44},
        spread={"a": 0.1, "b": 0.1},
        samples={"a": [1.0], "b": [1.44]},
        prediction="1.0: warm-up and sync make the difference, not the block",
    )


def _page_notebook(path) -> None:
    code = "x = 1  # " + "a comment as long as a notebook's line may be: " * 3
    code = code[:LINE]
    long_code = new_code_cell(code, execution_count=1)
    verdicts = "\n".join(str(_verdict(v)) for v in (HOLDS, CONTRADICTED, UNDECIDED)) + "\n"
    long_code.outputs = [new_output("stream", name="stdout", text=verdicts)]
    params = new_code_cell('PROFILE = "auto"', execution_count=2)
    params.metadata["tags"] = ["parameters"]
    intro = new_markdown_cell("# 00 · Layout\n\n**The question.** Does it fit?\n\n**Time:** 1 s.")
    nb = new_notebook(cells=[intro, params, long_code, new_markdown_cell("## 1 · The end")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def book_page(tmp_path_factory):
    base = tmp_path_factory.mktemp("book-layout")
    (base / "notebooks").mkdir()
    _page_notebook(base / "notebooks" / "00_layout.ipynb")
    assert build_book.build(base / "notebooks", base / "book", base / "src", execute_notebooks=False) == 0
    return base / "book" / "00_layout.html"


def _open(browser, page_file, size):
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    return page


@pytest.mark.parametrize("size", LAPTOPS, ids=lambda s: f"{s[0]}px")
def test_at_a_laptops_width_every_code_and_output_line_fits_the_column(browser, book_page, size):
    page = _open(browser, book_page, size)
    try:
        blocks = page.evaluate(_OVERFLOWING)
        page.locator("article div.cell").first.scroll_into_view_if_needed()
        page.screenshot(path=ARTIFACTS / f"book-layout-{size[0]}.png")
    finally:
        page.close()
    shown = [b["text"].split()[0] for b in blocks]
    assert shown == ["PROFILE", "x", "Claim:"], f"the page shows two code cells and one output: {blocks}"
    clipped = [b for b in blocks if b["needs"] > b["width"] + 1]
    assert not clipped, f"at {size[0]} px these blocks scroll sideways (a {LINE}-character line must fit): {clipped}"


def test_at_a_phones_width_each_verdict_word_is_on_screen(browser, book_page):
    page = _open(browser, book_page, PHONE)
    try:
        found = page.evaluate(_WORDS, list(WORDS.values()))
        sideways = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        page.locator("article div.cell_output").first.scroll_into_view_if_needed()
        page.screenshot(path=ARTIFACTS / "book-layout-390.png")
    finally:
        page.close()
    assert sorted(f["word"] for f in found) == sorted(WORDS.values()), f"verdict words on the page: {found}"
    hidden = [f for f in found if f["scrolls"] or f["left"] < 0 or f["right"] > PHONE[0]]
    assert not hidden, f"at {PHONE[0]} px these verdict words are off screen or in a block that scrolls: {hidden}"
    assert sideways <= 0, f"the page scrolls sideways by {sideways} px at {PHONE[0]} px"
