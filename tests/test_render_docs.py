"""The numbers the README, the instructor guide and each notebook's opening state about running times come from
docs/running_times.json (tools/render_docs.py), never typed by hand: how they are summed up, rounded and recorded."""

import json
import os
import subprocess
import sys

import pytest
import render_docs

from labkit.lab import manifest


def _times(seconds: dict, **quick) -> dict:
    return {"quick": {"how": "a test", "seconds": seconds, **quick}, "full": {"how": "a test", "seconds": {}}}


def test_the_summary_names_the_count_the_longest_and_the_total():
    slugs = manifest.slugs()[:3]
    text = render_docs.quick_summary(_times(dict(zip(slugs, (10.0, 22.4, 8.0), strict=True))), readme=True)
    assert "all three were within it" in text
    assert f"the longest, `{slugs[1]}`, 22 s" in text
    assert "all 3 together 0.7 minutes" in text  # 40.4 s
    assert "three times the budget" in text
    assert "neighbour" not in text, "no run beside a neighbour is recorded"


def test_a_notebook_over_its_budget_is_named_not_hidden():
    slugs = manifest.slugs()[:2]
    text = render_docs.quick_summary(_times({slugs[0]: 12.0, slugs[1]: 31.0}), readme=False)
    assert f"1 of 2 were within it (over it: {slugs[1]})" in text


def test_the_neighbour_run_and_the_verdicts_are_summed_up_when_recorded():
    slugs = manifest.slugs()[:2]
    times = _times({slugs[0]: 10.0, slugs[1]: 20.0}, make_test_s=600.0)
    times["quick"]["claims"] = {"holds": 5, "undecided": 0, "contradicted": 0, "undecided_in": []}
    times["neighbour"] = {
        "how": "a test",
        "seconds": {slugs[0]: 16.0, slugs[1]: 24.0},
        "make_test_s": 690.0,
        "claims": {"holds": 4, "undecided": 1, "contradicted": 0, "undecided_in": [slugs[1]]},
    }
    text = render_docs.quick_summary(times, readme=False)
    assert "`make test` as a whole took 10.0 minutes" in text
    assert "Its timing claims: 5 held, 0 undecided, 0 contradicted." in text
    assert f"took 16 to 24 s, `{slugs[0]}` growing most (10 s quiet, 16 s beside it), and `make test` 11.5" in text
    assert f"4 held, 1 undecided, 0 contradicted (undecided in `{slugs[1]}`)" in text


@pytest.mark.parametrize("measured, stated", [(12.2, 10), (12.6, 15), (23.1, 25), (2.0, 5), (61.0, 60)])
def test_an_opening_states_its_time_to_the_nearest_five_seconds(measured, stated):
    assert render_docs.stated_seconds(measured) == stated


def test_the_stated_time_is_rewritten_in_place_and_a_missing_one_is_an_error():
    line = '"**Time:** about 36 seconds to run in the quick profile on 2 CPU cores; 30 minutes to read.\\n",'
    assert render_docs.stated_time(line, 25, "x.ipynb") == line.replace("36", "25")
    assert "about 10 seconds" in render_docs.stated_time(line.replace("about 36 seconds", "under a minute"), 10, "x")
    with pytest.raises(SystemExit, match="x.ipynb: its opening needs one"):
        render_docs.stated_time('"**Time:** a while."', 10, "x.ipynb")


def test_recording_a_run_copies_its_times_and_tallies_its_verdicts(tmp_path):
    root, results = tmp_path / "root", tmp_path / "results"
    (root / "docs").mkdir(parents=True)
    results.mkdir()
    (root / render_docs.TIMES).write_text(json.dumps(_times({})))
    first, second = manifest.slugs()[:2]
    for slug, wall in ((first, 11.04), (second, 19.96)):
        (results / f"{slug}.run.json").write_text(json.dumps({"learner_wall_s": wall}))
    verdicts = [{"verdict": v} for v in ("holds", "holds", "undecided")]
    (results / f"{second}.json").write_text(json.dumps({"claims": verdicts}))
    render_docs.record_times(root, results, "neighbour", make_test_s=700.0)
    recorded = json.loads((root / render_docs.TIMES).read_text())["neighbour"]
    assert recorded["seconds"] == {first: 11.0, second: 20.0}
    assert recorded["claims"] == {"holds": 2, "undecided": 1, "contradicted": 0, "undecided_in": [second]}
    assert recorded["make_test_s"] == 700.0


def test_recording_from_a_folder_without_run_records_is_a_clear_error(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / render_docs.TIMES).write_text(json.dumps(_times({})))
    with pytest.raises(SystemExit, match="no notebook's run record"):
        render_docs.record_times(tmp_path, tmp_path, "quick")


@pytest.mark.processes
@pytest.mark.parametrize("tool", ["render_docs.py", "refresh_notebooks.py", "build_book.py", "gpu_acceptance.py"])
def test_a_tool_imports_its_own_checkouts_labkit_or_stops_loudly(tool, root, tmp_path):
    """Another checkout's labkit first on the path (a decoy that would render nothing) is never used; a caller that
    already imported it gets a clear stop naming both, not a silent run on the wrong manifest."""
    decoy = tmp_path / "other-checkout" / "labkit"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("NOTEBOOKS = []\n")
    (decoy / "lab").mkdir()
    (decoy / "lab" / "__init__.py").write_text("raise ImportError('the decoy labkit was imported')\n")
    env = dict(os.environ, PYTHONPATH=str(decoy.parent))
    ran = subprocess.run([sys.executable, f"tools/{tool}", "--help"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert "decoy" not in ran.stderr, ran.stderr[-2000:]
    preloaded = (
        f"import sys, runpy; sys.path[:0] = [{str(decoy.parent)!r}, 'tools']; import labkit; "
        f"sys.argv = ['{tool}', '--help']; runpy.run_path('tools/{tool}', run_name='__main__')"
    )
    stopped = subprocess.run([sys.executable, "-c", preloaded], cwd=root, env=env, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
    assert stopped.returncode != 0
    assert "this tool belongs to the checkout" in stopped.stderr and str(decoy.parent) in stopped.stderr


def test_render_docs_refuses_a_manifest_that_does_not_match_the_notebooks(monkeypatch, root):
    monkeypatch.setattr(manifest, "NOTEBOOKS", manifest.NOTEBOOKS[:-1])
    with pytest.raises(SystemExit, match="nothing would be rendered right"):
        render_docs.rendered(root)


def test_the_tiers_are_timed_by_make_and_stated_from_the_recorded_run(tmp_path):
    import tier_time

    assert tier_time.main(["stop", "unit"], root=tmp_path) == 1  # never started: an error, nothing made up
    assert (
        tier_time.main(["begin", "unit"], root=tmp_path) == 2 and tier_time.main(["start", "docs"], root=tmp_path) == 2
    )
    assert (
        tier_time.main(["start", "unit"], root=tmp_path) == 0 and tier_time.main(["stop", "unit"], root=tmp_path) == 0
    )
    recorded = json.loads((tmp_path / tier_time.TIMES).read_text())
    assert set(recorded["seconds"]) == {"unit"} and 0 <= recorded["seconds"]["unit"] < 60
    table = render_docs.tiers_table(_times({}, tiers={"unit": 31.6, "notebooks": 412.0}))
    assert "| `make unit` |" in table and "| 32 s |" in table and "| 6.9 min |" in table
    assert table.count("not yet measured") == 3  # lint, processes, browser: no figure invented
    assert [line.split("`")[1] for line in table.splitlines()[2:]] == [f"make {t}" for t in tier_time.TIERS]
