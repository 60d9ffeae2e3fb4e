"""Time the tiers of ``make test``: ``start NAME`` notes when a tier began, ``stop NAME`` records its seconds.

The Makefile calls it around each tier (lint, unit, processes, notebooks, browser); the seconds go to
``build/tier-times.json``, which ``tools/render_docs.py --quick-times`` copies into docs/running_times.json, from
where CONTRIBUTING.md's table of tiers states them. Standard library only: it runs before anything is installed.

    python tools/tier_time.py start unit
    python tools/tier_time.py stop unit
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

TIERS = ("lint", "unit", "processes", "notebooks", "browser")
TIMES = Path("build") / "tier-times.json"


def _read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
    os.replace(tmp, path)


def main(argv: list[str], root: Path | None = None) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop") or argv[1] not in TIERS:
        print(f"usage: tier_time.py start|stop {'|'.join(TIERS)}", file=sys.stderr)
        return 2
    action, tier = argv
    path = (root if root is not None else Path.cwd()) / TIMES
    data = _read(path)
    if action == "start":
        data.setdefault("started", {})[tier] = time.time()
    else:
        began = data.get("started", {}).pop(tier, None)
        if began is None:
            print(f"tier_time.py: {tier} was never started", file=sys.stderr)
            return 1
        data.setdefault("seconds", {})[tier] = round(time.time() - began, 1)
    _write(path, data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
