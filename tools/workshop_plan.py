"""The one-day workshop plan of docs/instructor.md: three tracks of six teaching hours, written from data.

The tracks and their teaching minutes are the plan's estimate, set here (the one place to change them); each
notebook's measured quick-profile run time comes from ``docs/running_times.json``, its number and what a GPU adds
from ``labkit/lab/manifest.py``, and whether reference GPU results are recorded for it from ``results/reference/``.
``tools/render_docs.py`` writes the plan between its markers; ``render_docs.py --check`` (run by the tests) fails
when it is stale, and tests/test_workshop_plan.py checks the plan's shape (order, size, six hours).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from labkit.lab import manifest

TEACHING_MINUTES = 6 * 60  # six teaching hours; breaks and lunch come on top
OPENING = ("Welcome, the room's `python -m labkit doctor` lines, fixing the stragglers", 20)
CLOSING = (
    "Wrap-up: each attendee's report of the track (`python -m labkit report --only <the track's notebooks>`, "
    "started during the last notebook: it re-runs them, about the quick-run sum below plus a kernel start "
    "each), questions, where to go next",
    20,
)
# Notebooks whose lesson needs two GPUs or more: a reference recorded on one GPU does not show it.
SEVERAL_GPUS = ("multiple_gpus", "sharding")
# Notebooks whose GPU path has not yet run to its end on a GPU since it last changed (the guide's reference section
# says which part): rehearse them on the projector GPU before the day.
REHEARSE = ("batch_size", "optimisation", "where_time_goes")


@dataclass(frozen=True)
class Track:
    """One day's path through the notebooks: ``(slug, teaching minutes)`` in the manifest's order."""

    name: str
    audience: str
    notebooks: tuple[tuple[str, int], ...]


# Teaching minutes are the plan's estimate: reading, the predictions called out before each measurement, the
# exercises and the discussion, on top of the notebook's run. The instructor guide's per-notebook notes say what to
# stress in each.
TRACKS = (
    Track(
        "core",
        "everyone, on their own laptops (CPU is enough): what decides an AI job's time and memory",
        (
            ("start_here", 50),
            ("inference_vs_training", 45),
            ("model_size", 40),
            ("memory", 45),
            ("batch_size", 45),
            ("latency_throughput", 45),
            ("estimating_a_job", 50),
        ),
    ),
    Track(
        "GPU",
        "people who train or fine-tune on several GPUs; the GPU-only parts from a projector GPU or the book",
        (
            ("start_here", 50),
            ("inference_vs_training", 45),
            ("memory", 45),
            ("multiple_gpus", 50),
            ("sharding", 50),
            ("checkpoints", 45),
            ("fused_attention", 35),
        ),
    ),
    Track(
        "serving",
        "people who run models behind an API: latency, throughput, language-model serving, sharing a GPU",
        (
            ("start_here", 50),
            ("batch_size", 40),
            ("latency_throughput", 50),
            ("serving_llms", 55),
            ("mixture_of_experts", 40),
            ("optimisation", 45),
            ("sharing_a_gpu", 40),
        ),
    ),
)


def _clock(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}"


def _references(root: Path, slug: str) -> list[str]:
    return sorted(p.parent.name for p in (root / "results" / "reference").glob(f"*/{slug}.json"))


def _gpu_count(root: Path, gpu: str, slug: str) -> int:
    """How many GPUs the reference record of ``slug`` on ``gpu`` ran on (its machine card's ``gpu_count``)."""
    card = json.loads((root / "results" / "reference" / gpu / f"{slug}.json").read_text()).get("card", {})
    return int(card.get("gpu_count") or 0)


def _projector(root: Path, nb: manifest.Notebook) -> str:
    """What to show beside the attendees' CPU runs: what a GPU adds, and where to see it without one."""
    recorded = _references(root, nb.slug)
    gpus = {name: _gpu_count(root, name, nb.slug) for name in recorded}
    if nb.slug in SEVERAL_GPUS and recorded and all(n < 2 for n in gpus.values()):
        where = f"recorded on one GPU only ({', '.join(recorded)}): no multi-GPU result; needs two GPUs or more"
    elif recorded:
        where = f"references recorded on {', '.join(recorded)}"
    else:
        where = "no references recorded: projector GPU"
    if nb.slug in REHEARSE:
        where += " (its GPU path has not run to its end since it changed: rehearse it first)"
    lead = f"**GPU-only: {nb.gpu_adds}**" if nb.gpu_essential else nb.gpu_adds
    return f"{lead}; {where}"


def plan_markdown(times: dict, root: Path) -> str:
    """The tracks as tables: a running clock, the notebook, its teaching minutes, its measured quick run, the GPU."""
    quick = times["quick"]["seconds"]
    index = {nb.slug: i for i, nb in enumerate(manifest.NOTEBOOKS)}
    parts = []
    for track in TRACKS:
        rows = [
            "| clock (h:mm) | # | notebook | teaching minutes (the plan's estimate) | quick run, measured (s) | what a GPU "
            "adds, for the projector |",
            "|---|---|---|---|---|---|",
            f"| 0:00 | | {OPENING[0]} | {OPENING[1]} | | |",
        ]
        clock = OPENING[1]
        for slug, minutes in track.notebooks:
            nb = manifest.entry(slug)
            seconds = quick.get(slug)
            measured = "not yet measured" if seconds is None else f"{seconds:.0f}"
            rows.append(
                f"| {_clock(clock)} | {index[slug]:02d} | `{slug}` | {minutes} | {measured} | {_projector(root, nb)} |"
            )
            clock += minutes
        rows.append(f"| {_clock(clock)} | | {CLOSING[0]} | {CLOSING[1]} | | |")
        clock += CLOSING[1]
        run_s = sum(quick.get(slug, 0.0) for slug, _ in track.notebooks)
        parts.append(
            f"**The {track.name} track** ({len(track.notebooks)} notebooks), for {track.audience}.\n\n"
            + "\n".join(rows)
            + f"\n\nTeaching time {clock // 60} h {clock % 60:02d} min (the plan's estimate, breaks not counted); the "
            f"{len(track.notebooks)} notebooks' quick runs took {run_s / 60:.1f} minutes together on the recorded "
            "2-core run, so nearly all of the day is reading, predicting and discussing, not waiting."
        )
    return "\n\n".join(parts)
