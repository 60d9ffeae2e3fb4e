"""Write the parts of README.md and docs/instructor.md that come from the notebooks' manifest.

``labkit/lab/manifest.py`` holds the notebooks' order, titles, questions and what a GPU adds; each notebook's opening
holds its learning goals; ``docs/running_times.json`` holds measured running times. From them this writes, between
marker comments, the README's map of the notebooks, the instructor guide's running-times table, goals and workshop
plan (its tracks from tools/workshop_plan.py), the sentences that sum the times up, and the time each notebook's
opening states ("**Time:** about N seconds to run in the quick profile"), so that adding or moving a notebook, or
measuring it again, never means editing a number by hand. From the repository address in pyproject.toml
(``[project.urls] Repository``) it writes, through tools/hosted.py, every notebook's first code cell (which installs
labkit where it is missing, as on Colab), the README's Binder and Colab badges and docs/hosted.md's Colab links.

    python tools/render_docs.py                       # rewrite the generated parts
    python tools/render_docs.py --check               # exit 1 if they are out of date (the tests run this check)
    python tools/render_docs.py --quick-times build/under-test/results --make-test-s 690
                                                      # first record a quiet `make test` run's times and verdicts
    python tools/render_docs.py --neighbour-times build/under-test/results --make-test-s 720
                                                      # ... or those of a run beside `tools/neighbour.py --idle 0`
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat
import own_checkout  # noqa: F401  (before labkit: this checkout's labkit, or a clear stop)

# isort: split
import hosted
import render_layout
import workshop_plan

from labkit.lab import manifest

ROOT = Path(__file__).resolve().parents[1]
NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty"
).split()
# The opening cell's stated quick time, as it is stored in the notebook's JSON (one line of the cell's source).
STATED_TIME = re.compile(r"(\*\*Time:\*\* )(?:about \d+ seconds|under a minute)( to run in the quick profile)")
TIMES = Path("docs") / "running_times.json"
BEGIN = "<!-- begin {name}: written by tools/render_docs.py from {source}; edit there, not here -->"
MANIFEST = "labkit/lab/manifest.py"
LAYOUT_SOURCE = "the modules' docstrings and imports"
TIMES_SOURCE = "docs/running_times.json"
PLAN_SOURCE = "tools/workshop_plan.py and docs/running_times.json"
URLS_SOURCE = "pyproject.toml [project.urls]"
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


def _count(n: int) -> str:
    return NUMBERS[n] if n < len(NUMBERS) else str(n)


def stated_seconds(seconds: float) -> int:
    """A measured quick time as an opening states it: to the nearest 5 s, since runs vary by a third or more."""
    return max(5, 5 * round(seconds / 5))


def quick_summary(times: dict, readme: bool) -> str:
    """The sentences that sum the quick times up: how many stayed within the budget, the longest, the total, and
    the run beside a busy neighbour where one was recorded."""
    quick = times["quick"]["seconds"]
    measured = [nb for nb in manifest.NOTEBOOKS if nb.slug in quick]
    if not measured:
        return "No quick run has been recorded yet (`tools/render_docs.py --quick-times`)."
    over = [nb.slug for nb in measured if quick[nb.slug] > nb.budget_s]
    longest = max(measured, key=lambda nb: quick[nb.slug])
    budgets = {nb.budget_s for nb in measured}
    budget = f"{budgets.pop():.0f} seconds" if len(budgets) == 1 else "set in the manifest"
    within = (
        f"all {_count(len(measured))} were within it" if not over
        else f"{len(measured) - len(over)} of {len(measured)} were within it (over it: {', '.join(over)})"
    )  # fmt: skip
    text = (
        f"Each notebook's budget is {budget}, and {within} (the longest, `{longest.slug}`, "
        f"{quick[longest.slug]:.0f} s; all {len(measured)} together {sum(quick[nb.slug] for nb in measured) / 60:.1f} "
        "minutes"
    )
    if "make_test_s" in times["quick"]:
        text += f"; `make test` as a whole took {times['quick']['make_test_s'] / 60:.1f} minutes"
    text += ")."
    if "claims" in times["quick"]:
        text += f" Its timing claims: {_tally(times['quick']['claims'])}."
    near = times.get("neighbour")
    if near:
        both = [nb.slug for nb in measured if nb.slug in near["seconds"]]
        grew = max(both, key=lambda s: near["seconds"][s] / quick[s])
        lo, hi = min(near["seconds"][s] for s in both), max(near["seconds"][s] for s in both)
        text += (
            f" Beside a neighbour keeping one core busy all the time (`tools/neighbour.py --idle 0`), the same "
            f"notebooks took {lo:.0f} to {hi:.0f} s, `{grew}` growing most ({quick[grew]:.0f} s quiet, "
            f"{near['seconds'][grew]:.0f} s beside it)"
        )
        if "make_test_s" in near:
            text += f", and `make test` {near['make_test_s'] / 60:.1f} minutes"
        text += "."
        if "claims" in near:
            text += f" Its timing claims: {_tally(near['claims'])}."
    if readme:
        text += " The test's guard is three times the budget."
    return text


def _tally(claims: dict) -> str:
    text = f"{claims['holds']} held, {claims['undecided']} undecided, {claims['contradicted']} contradicted"
    if claims.get("undecided_in"):
        text += f" (undecided in {', '.join(f'`{s}`' for s in claims['undecided_in'])})"
    return text


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


def fill(text: str, name: str, body: str, where: str, source: str = MANIFEST) -> str:
    """``text`` with the generated region ``name`` replaced by ``body``."""
    begin, end = BEGIN.format(name=name, source=source), END.format(name=name)
    pattern = re.compile(re.escape(begin) + r"\n.*?\n" + re.escape(end), re.S)
    if len(pattern.findall(text)) != 1:
        raise SystemExit(f"{where}: needs exactly one region\n{begin}\n...\n{end}")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


TIER_WORK = {
    "lint": "`ruff check` and `ruff format --check` (labkit, tests, notebooks at 110 characters a line, tools), `mypy` on "
    "labkit",
    "unit": "labkit's unit tests: exact values where they exist, the structure of every notebook, the docs, the floors",
    "processes": "tests that start processes: DDP workers, servers, the background trainer, papermill, the wheel in a "
    "scratch environment, a dummy notebook inserted into a copy of the project",
    "notebooks": "every notebook once under nbval, as the learner gets it and then with its exercises solved, then what "
    "each run recorded",
    "browser": "the start here notebook run in JupyterLab in a headless Chromium",
}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "not yet measured"
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def tiers_table(times: dict) -> str:
    """CONTRIBUTING's table of the tiers of ``make test``, with each tier's seconds from the recorded quiet run."""
    measured = times["quick"].get("tiers", {})
    rows = [
        "| target | what it runs | time on the last recorded run (2 cores) |",
        "|---|---|---|",
        *(f"| `make {tier}` | {work} | {_duration(measured.get(tier))} |" for tier, work in TIER_WORK.items()),
    ]
    return "\n".join(rows)


def rendered(root: Path) -> dict[Path, str]:
    """What README.md and docs/instructor.md should hold, from the manifest, the notebooks and the times."""
    on_disk = sorted(p.name for p in (root / "notebooks").glob("*.ipynb"))
    listed = sorted(nb.file for nb in manifest.NOTEBOOKS)
    if not listed or on_disk != listed:
        raise SystemExit(
            f"the manifest labkit was imported with ({manifest.__file__}) lists {listed or 'no notebooks'}; "
            f"{root / 'notebooks'} holds {on_disk}: nothing would be rendered right"
        )
    times = json.loads((root / TIMES).read_text())
    readme, guide = root / "README.md", root / "docs" / "instructor.md"
    text = fill(readme.read_text(), "map", readme_map(times), "README.md")
    height = render_layout.levels(root / "labkit")  # the floors' order, read from their imports once
    address = hosted.repository(root)  # the Binder badge, the Colab links and every notebook's install cell
    text = fill(text, "hosted", hosted.readme_links(address), "README.md", URLS_SOURCE)
    out = {readme: fill(text, "clone", hosted.clone_command(address), "README.md", URLS_SOURCE)}
    contributing = root / "CONTRIBUTING.md"
    text = fill(contributing.read_text(), "tiers", tiers_table(times), "CONTRIBUTING.md", TIMES_SOURCE)
    block = render_layout.readme_block(root / "labkit", height)
    text = fill(text, "quick times", quick_summary(times, readme=True), "CONTRIBUTING.md")
    out[contributing] = fill(text, "layout", block, "CONTRIBUTING.md", LAYOUT_SOURCE)
    for floor in height:
        init = root / "labkit" / floor / "__init__.py"
        out[init] = render_layout.with_docstring(init, render_layout.floor_docstring(root / "labkit", floor, height))
    text = fill(guide.read_text(), "running times", times_table(times), "docs/instructor.md")
    text = fill(text, "quick times", quick_summary(times, readme=False), "docs/instructor.md")
    text = fill(text, "workshop plan", workshop_plan.plan_markdown(times, root), "docs/instructor.md", PLAN_SOURCE)
    out[guide] = fill(text, "goals", guide_goals(root / "notebooks"), "docs/instructor.md")
    hosted_doc = root / "docs" / "hosted.md"
    table = hosted.colab_table(address, [(nb.slug, nb.title) for nb in manifest.NOTEBOOKS])
    text = fill(hosted_doc.read_text(), "pip install", hosted.pip_command(address), "docs/hosted.md", URLS_SOURCE)
    out[hosted_doc] = fill(text, "colab links", table, "docs/hosted.md", URLS_SOURCE)
    preflight = root / "docs" / "preflight.md"
    out[preflight] = fill(
        preflight.read_text(), "clone", hosted.clone_command(address), "docs/preflight.md", URLS_SOURCE
    )
    for nb in manifest.NOTEBOOKS:
        seconds = times["quick"]["seconds"].get(nb.slug)
        path = root / "notebooks" / nb.file
        text = hosted.with_install_cell(path.read_text(), address, path.name)
        out[path] = text if seconds is None else stated_time(text, stated_seconds(seconds), path.name)
    return out


def stated_time(text: str, seconds: int, where: str) -> str:
    """A notebook's JSON text with its opening's stated quick time set to ``seconds`` (the one line that states it)."""
    if len(STATED_TIME.findall(text)) != 1:
        raise SystemExit(f"{where}: its opening needs one '**Time:** about N seconds to run in the quick profile'")
    return STATED_TIME.sub(lambda m: f"{m.group(1)}about {seconds} seconds{m.group(2)}", text)


NEIGHBOUR_HOW = (
    "make test from a fresh clone beside tools/neighbour.py --idle 0 (one core kept busy all the time), on the "
    "machine of the quick times"
)


def record_times(root: Path, results: Path, kind: str, make_test_s: float | None = None) -> None:
    """Copy each notebook's learner wall time from a run's ``*.run.json`` records into the running times under
    ``kind`` ("quick": a quiet run; "neighbour": one beside a busy core), with the tally of its timing claims."""
    times = json.loads((root / TIMES).read_text())
    entry = times.setdefault(kind, {"how": NEIGHBOUR_HOW, "seconds": {}})
    tally = {"holds": 0, "undecided": 0, "contradicted": 0, "undecided_in": []}
    for slug in manifest.slugs():
        run = results / f"{slug}.run.json"
        if run.exists():
            entry["seconds"][slug] = round(json.loads(run.read_text())["learner_wall_s"], 1)
        record = results / f"{slug}.json"
        for claim in json.loads(record.read_text())["claims"] if record.exists() else []:
            tally[claim["verdict"]] += 1
            if claim["verdict"] == "undecided" and slug not in tally["undecided_in"]:
                tally["undecided_in"].append(slug)
    if not entry["seconds"]:
        raise SystemExit(f"{results}: no notebook's run record (*.run.json) is there")
    entry["claims"] = tally
    if make_test_s is not None:
        entry["make_test_s"] = make_test_s
    tier_file = root / "build" / "tier-times.json"
    if kind == "quick" and tier_file.exists():  # written by `make test` (tools/tier_time.py)
        entry["tiers"] = json.loads(tier_file.read_text()).get("seconds", {})
    (root / TIMES).write_text(json.dumps(times, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated part is out of date")
    parser.add_argument("--quick-times", type=Path, help="a quiet run's results folder: record its times first")
    parser.add_argument("--neighbour-times", type=Path, help="the same, for a run beside a busy neighbour core")
    parser.add_argument("--make-test-s", type=float, help="with either: that run's `make test` seconds")
    args = parser.parse_args(argv)
    if args.make_test_s is not None and not (args.quick_times or args.neighbour_times):
        parser.error("--make-test-s goes with --quick-times or --neighbour-times")
    if args.quick_times:
        record_times(root, args.quick_times, "quick", args.make_test_s)
    if args.neighbour_times:
        record_times(root, args.neighbour_times, "neighbour", args.make_test_s)
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
