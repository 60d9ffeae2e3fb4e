"""Write the parts of README.md and docs/instructor.md that come from the notebooks' manifest.

``labkit/lab/manifest.py`` holds the notebooks' order, titles, questions and what a GPU adds; each notebook's opening
holds its learning goals; ``docs/running_times.json`` holds measured running times. From them this writes, between
marker comments, the README's map of the notebooks and the instructor guide's running-times table and goals, so
that adding or moving a notebook never means editing a table by hand.

    python tools/render_docs.py                       # rewrite the generated parts
    python tools/render_docs.py --check               # exit 1 if they are out of date (the tests run this check)
    python tools/render_docs.py --quick-times build/under-test/results
                                                      # first record the quick times of a `make test` run
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

from labkit.lab import manifest

ROOT = Path(__file__).resolve().parents[1]
TIMES = Path("docs") / "running_times.json"
BEGIN = "<!-- begin {name}: written by tools/render_docs.py from labkit/lab/manifest.py; edit there, not here -->"
END = "<!-- end {name} -->"


def goals(notebook: Path) -> str:
    """The bullets under **You will be able to** in a notebook's opening cell, as written there."""
    opening = nbformat.read(notebook, as_version=4).cells[0].source
    found = re.search(r"\*\*You will be able to\*\*\n((?:- .*\n?(?:  .*\n?)*)+)", opening)
    if not found:
        raise SystemExit(f"{notebook.name}: its opening cell has no '**You will be able to**' list")
    return found.group(1).strip()


def _quick(times: dict, slug: str) -> str:
    seconds = times["quick"]["seconds"].get(slug)
    return "not yet measured" if seconds is None else f"{seconds:.0f}"


def readme_map(times: dict) -> str:
    rows = ["| # | notebook | the question | quick run, 2-core CPU (s) | a GPU adds |", "|---|---|---|---|---|"]
    for i, nb in enumerate(manifest.NOTEBOOKS):
        gpu = f"**{nb.gpu_adds}**" if nb.gpu_essential else nb.gpu_adds
        link = f"[`{nb.slug}`](notebooks/{nb.file})"
        rows.append(f"| {i:02d} | {link} | {nb.question} ({nb.topics}) | {_quick(times, nb.slug)} | {gpu} |")
    return "\n".join(rows)


def times_table(times: dict) -> str:
    rows = ["| # | notebook | quick profile (s) | full profile (s) |", "|---|---|---|---|"]
    for i, nb in enumerate(manifest.NOTEBOOKS):
        full = times["full"]["seconds"].get(nb.slug, "not yet measured")
        rows.append(f"| {i:02d} | `{nb.slug}` | {_quick(times, nb.slug)} | {full} |")
    return "\n".join(rows)


def guide_goals(notebooks: Path) -> str:
    parts = []
    for nb in manifest.NOTEBOOKS:
        part = f"### {nb.title}\n\n`notebooks/{nb.file}`\n\nLearners will be able to (from the notebook's own opening):"
        part += "\n\n" + goals(notebooks / nb.file)
        if nb.teaching_notes:
            part += "\n\nTeaching notes: " + nb.teaching_notes
        parts.append(part)
    return "\n\n".join(parts)


def fill(text: str, name: str, body: str, where: str) -> str:
    """``text`` with the generated region ``name`` replaced by ``body``."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    pattern = re.compile(re.escape(begin) + r"\n.*?\n" + re.escape(end), re.S)
    if len(pattern.findall(text)) != 1:
        raise SystemExit(f"{where}: needs exactly one region\n{begin}\n...\n{end}")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


def rendered(root: Path) -> dict[Path, str]:
    """What README.md and docs/instructor.md should hold, from the manifest, the notebooks and the times."""
    times = json.loads((root / TIMES).read_text())
    readme, guide = root / "README.md", root / "docs" / "instructor.md"
    return {
        readme: fill(readme.read_text(), "map", readme_map(times), "README.md"),
        guide: fill(
            fill(guide.read_text(), "running times", times_table(times), "docs/instructor.md"),
            "goals",
            guide_goals(root / "notebooks"),
            "docs/instructor.md",
        ),
    }


def record_quick_times(root: Path, results: Path) -> None:
    """Copy each notebook's learner wall time from a run's ``*.run.json`` records into the running times."""
    times = json.loads((root / TIMES).read_text())
    for slug in manifest.slugs():
        run = results / f"{slug}.run.json"
        if run.exists():
            times["quick"]["seconds"][slug] = round(json.loads(run.read_text())["learner_wall_s"], 1)
    (root / TIMES).write_text(json.dumps(times, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated part is out of date")
    parser.add_argument("--quick-times", type=Path, help="a run's results folder: record its quick times first")
    args = parser.parse_args(argv)
    if args.quick_times:
        record_quick_times(root, args.quick_times)
    stale = []
    for path, text in rendered(root).items():
        if path.read_text() != text:
            stale.append(path.relative_to(root))
            if not args.check:
                path.write_text(text)
    if args.check and stale:
        print(f"out of date: {', '.join(map(str, stale))}; run python tools/render_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
