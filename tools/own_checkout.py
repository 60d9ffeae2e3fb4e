"""Make a tool import the labkit of the checkout it sits in, not whichever labkit Python finds first.

A tool run from one clone with another clone's labkit installed (editable) would read the other clone's manifest
and write this clone's docs from it, or find none of its notebooks and write nothing. Each tool imports this
module before labkit; it puts the checkout first on ``sys.path`` and stops, naming both, if labkit still comes from
elsewhere (already imported by the caller from another checkout).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if sys.path[:1] != [str(ROOT)]:
    sys.path.insert(0, str(ROOT))

import labkit  # noqa: E402

if Path(labkit.__file__).resolve().parent != ROOT / "labkit":
    raise SystemExit(
        f"this tool belongs to the checkout {ROOT}, but Python imported labkit from {Path(labkit.__file__).parent}: "
        "run it with that checkout's Python, or from the checkout the labkit comes from"
    )
