"""A commit message's shape: a subject of at most 72 characters, ``<notebook|floor|area>: what changed`` (or a list
of areas, ``sharding, checkpoints: ...``), then a blank
line before the body (the detail goes there). Run by pre-commit at the commit-msg stage (.pre-commit-config.yaml).

    python tools/check_commit_msg.py .git/COMMIT_EDITMSG
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MAX_SUBJECT = 72
AREAS = re.compile(r"^[\w.-]+(?:, [\w.-]+)*: \S")  # one area, or a list of them: 'sharding, checkpoints: ...'


def problems(message: str) -> list[str]:
    """What is wrong with ``message`` (git's comment lines ignored); empty when it is fine."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].strip():
        return ["the message is empty: a subject line is needed"]
    subject, found = lines[0], []
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject is {len(subject)} characters; at most {MAX_SUBJECT} (the detail goes in the body)")
    if not AREAS.match(subject):
        found.append("the subject starts with what it changes: '<notebook|floor|area>[, <another>]: what changed'")
    if len(lines) > 1 and lines[1].strip():
        found.append("a blank line separates the subject from the body")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    found = problems(Path(argv[0]).read_text())
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
