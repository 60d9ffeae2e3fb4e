"""The one-day workshop plan (docs/instructor.md, from tools/workshop_plan.py) and the attendee's pre-flight page.

That the plan's rendered tables are current is render_docs' ``--check`` (tests/test_notebook_structure.py runs it);
here: the plan's shape, and that its numbers come from the recorded run, and the pre-flight page's agreement with
the doctor.
"""

import json
import re
from pathlib import Path

import pytest
import workshop_plan

from labkit.lab import doctor, doctor_checks, manifest

ROOT = Path(__file__).resolve().parents[1]
ORDER = {nb.slug: i for i, nb in enumerate(manifest.NOTEBOOKS)}


@pytest.mark.parametrize("track", workshop_plan.TRACKS, ids=[t.name for t in workshop_plan.TRACKS])
def test_a_track_is_known_notebooks_in_teaching_order_within_six_hours(track):
    slugs = [slug for slug, _ in track.notebooks]
    assert all(slug in ORDER for slug in slugs), f"{track.name}: unknown notebooks {set(slugs) - set(ORDER)}"
    assert slugs == sorted(slugs, key=ORDER.get), f"{track.name} is not in the manifest's teaching order"
    assert len(set(slugs)) == len(slugs) and slugs[0] == "start_here"
    minutes = workshop_plan.OPENING[1] + workshop_plan.CLOSING[1] + sum(m for _, m in track.notebooks)
    assert minutes <= workshop_plan.TEACHING_MINUTES, f"{track.name}: {minutes} teaching minutes"


def test_the_core_track_has_six_or_seven_notebooks_and_there_is_a_gpu_and_a_serving_track():
    names = [t.name for t in workshop_plan.TRACKS]
    assert names == ["core", "GPU", "serving"]
    assert 6 <= len(workshop_plan.TRACKS[0].notebooks) <= 7
    gpu = {slug for slug, _ in workshop_plan.TRACKS[1].notebooks}
    assert set(doctor_checks.NEED_PROCESS_GROUP) & gpu, "the GPU track teaches the multi-process notebooks"


def test_the_plan_states_the_recorded_run_times_and_the_clock_adds_up():
    times = json.loads((ROOT / "docs" / "running_times.json").read_text())
    quick = times["quick"]["seconds"]
    text = workshop_plan.plan_markdown(times, ROOT)
    for track in workshop_plan.TRACKS:
        clock = workshop_plan.OPENING[1]
        for slug, minutes in track.notebooks:
            row = f"| {clock // 60}:{clock % 60:02d} | {ORDER[slug]:02d} | `{slug}` | {minutes} | {quick[slug]:.0f} |"
            assert row in text, row
            clock += minutes
        total = sum(quick[slug] for slug, _ in track.notebooks) / 60
        assert f"quick runs took {total:.1f} minutes together" in text
    assert text.count("the plan's estimate") == 2 * len(workshop_plan.TRACKS)  # the column, and the total


def test_a_notebook_without_a_recorded_time_says_so():
    times = {"quick": {"seconds": {}}}
    assert "not yet measured" in workshop_plan.plan_markdown(times, ROOT)


def test_the_guide_carries_the_plan_and_links_the_preflight_page():
    guide = (ROOT / "docs" / "instructor.md").read_text()
    assert "## A one-day workshop" in guide and "<!-- begin workshop plan:" in guide
    assert "[preflight.md](preflight.md)" in guide


def test_the_preflight_page_matches_what_the_doctor_checks():
    page = (ROOT / "docs" / "preflight.md").read_text()
    assert f"(the doctor wants {doctor.MIN_FREE_GIB:g} GiB)" in page
    rows = set(re.findall(r"^\| `(\w+)`", page, re.M))
    assert {"packages", "device", "cores", "disk", "widgets", "kernel", "processes", "compiler", "noise"} <= rows
    assert "python -m labkit doctor" in page and "[install.md](install.md)" in page
    assert "labkit doctor: OK, ready to run the notebooks on cpu" in page


def test_a_reference_from_one_gpu_is_not_offered_for_a_lesson_that_needs_several():
    assert set(workshop_plan.SEVERAL_GPUS) | set(workshop_plan.REHEARSE) <= set(ORDER)
    for slug in workshop_plan.SEVERAL_GPUS:
        nb = manifest.entry(slug)
        shown = workshop_plan._projector(ROOT, nb)
        recorded = sorted(ROOT.glob(f"results/reference/*/{slug}.json"))
        cards = [json.loads(p.read_text())["card"].get("gpu_count", 0) for p in recorded]
        if recorded and all(n < 2 for n in cards):
            assert "no multi-GPU result" in shown and "references recorded on" not in shown, shown
