"""What a learner should not find in an executed notebook's outputs: raw warnings, this machine's paths, NaN cells.

``noise(outputs)`` lists, for one cell's outputs (nbformat output dicts, as a kernel sent them), what reads as
noise rather than lesson: text on stderr that is not one of labkit's own one-line messages (``labkit: ...``, see
:mod:`labkit.core.errors`), a Python warning (``SomeWarning: ...``) or deprecation notice from any library, an
absolute path of the machine that ran it (the checkout, the Python environment, the home directory), a ``NaN``
in a displayed table, and a pandas table whose first column is an unnamed 0, 1, 2, ... index (a column of row
numbers a reader has to skip). The notebook tier applies it to every cell nbval ran (tests/test_notebooks.py).
"""

from __future__ import annotations

import html
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WARNING = re.compile(r"\b[A-Z]\w*Warning\b(?::|\))")  # "UserWarning: ...", "warn(...) (FutureWarning)"
_DEPRECATED = re.compile(r"\b(?:is|are|was|has been|will be) deprecated\b|\bdeprecat\w+ (?:since|in) \w", re.I)
_NAN = re.compile(r"(?<![\w.])(?:NaN|nan|<NA>)(?![\w.])")
_FRAME = re.compile(r'<table border="1" class="dataframe[^"]*">(.*?)</table>', re.S)
_ROW_HEADER = re.compile(r"<tr>\s*<th>([^<]*)</th>")


def machine_paths() -> list[str]:
    """Absolute paths that name this machine's checkout, Python environment or home directory."""
    candidates = {str(ROOT), sys.prefix, sys.base_prefix, os.path.realpath(sys.prefix), str(Path.home())}
    # the shortest first would hide nothing; "/" or "/root" alone are too short to be told from prose
    return sorted((p for p in candidates if p and len(p) > 5), key=len, reverse=True)


def _texts(output: Mapping) -> Iterable[tuple[str, str]]:
    """(kind, text) for each textual part of one output: stream name or MIME type."""
    if output.get("output_type") == "stream":
        yield output.get("name", "stdout"), _joined(output.get("text", ""))
    for mime, value in (output.get("data") or {}).items():
        if mime.startswith("text/") or mime.endswith("json"):
            yield mime, _joined(value)


def _joined(value: object) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _range_index_frames(page: str) -> int:
    """How many pandas tables in an HTML output start each row with an unnamed 0, 1, 2, ... index."""
    count = 0
    for body in _FRAME.findall(page):
        head, _, rows = body.partition("<tbody>")
        labels = [html.unescape(x).strip() for x in _ROW_HEADER.findall(rows)]
        named_index = head.count("<tr") > 1  # pandas writes the index's name as a second header row
        if labels and not named_index and labels == [str(i) for i in range(len(labels))]:
            count += 1
    return count


def noise(outputs: Iterable[Mapping], paths: Iterable[str] | None = None) -> list[str]:
    """What in one cell's outputs a learner should not have to read past (an empty list: nothing)."""
    paths = list(machine_paths() if paths is None else paths)
    found: list[str] = []
    for output in outputs:
        for kind, text in _texts(output):
            if kind == "stderr":
                stray = [line for line in text.splitlines() if line.strip() and not line.startswith("labkit: ")]
                if stray:
                    found.append(f"stderr: {stray[0][:160]!r}")
            for pattern, what in ((_WARNING, "a Python warning"), (_DEPRECATED, "a deprecation notice")):
                hit = pattern.search(text)
                if hit:
                    found.append(f"{what} ({kind}): {_around(text, hit.start())!r}")
            for path in paths:
                if path in text:
                    found.append(f"this machine's path {path} ({kind}): {_around(text, text.index(path))!r}")
                    break
            if kind in ("text/html", "text/plain") and output.get("output_type") != "stream":
                hit = _NAN.search(text)
                if hit:
                    found.append(f"NaN in a table ({kind}): {_around(text, hit.start())!r}")
            if kind == "text/html" and _range_index_frames(text):
                found.append("a table whose first column is an unnamed 0, 1, 2, ... index (hide it or name it)")
    return list(dict.fromkeys(found))


def _around(text: str, at: int, width: int = 70) -> str:
    start = text.rfind("\n", 0, at) + 1
    return text[max(start, at - width) : at + width].split("\n")[0]
