import json
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from labkit.lab import report

GOOD = """import labkit
import matplotlib.pyplot as plt
log = labkit.ResultLog("00_good", labkit.machine_card("cpu", profile=labkit.resolve_profile(PROFILE)))
log.headline(answer=42)
labkit.claims.decide(labkit.claims.Claim("x is above 1", labkit.claims.stat("x") > 1), {"x": lambda: 2.0}, timed=False, log=log)
log.save()
fig, ax = plt.subplots(figsize=(4, 3))
ax.plot([1, 2, 3], [1, 4, 9])
ax.set(xlabel="size (items)", ylabel="time (s)")
plt.show()"""


def _notebook(path, body, title="A notebook"):
    params = new_code_cell('PROFILE = "auto"')
    params.metadata["tags"] = ["parameters"]
    intro = new_markdown_cell(f"# {title}\n\n**The question.** Why is `x` so **slow**?\n\n**Time:** 1 s.")
    section = new_markdown_cell("## 1 · The measurement")
    nb = new_notebook(cells=[intro, params, section, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def make_report(tmp_path, with_reference=True):
    """Two notebooks (one with a plot, one failing) and a reference GPU result for the first."""
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _notebook(nbdir / "00_good.ipynb", GOOD, title="00 · Good")
    _notebook(nbdir / "01_bad.ipynb", "raise RuntimeError('deliberate failure')", title="01 · Bad")
    if with_reference:
        ref = tmp_path / "ref" / "results" / "reference" / "h200"
        ref.mkdir(parents=True)
        card = {"device_name": "NVIDIA H200", "torch": "2.14.1", "cuda": "13.0", "torch_threads": 16}
        (ref / "00_good.json").write_text(json.dumps({"card": card, "summary": {"answer": 41.5}}))
    code = report.main(str(nbdir), str(tmp_path / "build"), profile="quick", reference_root=tmp_path / "ref")
    return code, tmp_path / "build"


@pytest.mark.processes
def test_report_runs_every_notebook_reports_failures_and_is_one_self_contained_file(tmp_path):
    code, build = make_report(tmp_path)
    assert code == 1  # one notebook failed

    runs = json.loads((build / "runs.json").read_text())
    assert [(r["notebook"], r["status"]) for r in runs] == [("00_good", "ok"), ("01_bad", "failed")]
    assert "deliberate failure" in runs[1]["error"]

    page = (build / "report.html").read_text()
    assert "<td>answer</td><td>42</td><td>41.5</td>" in page  # local result beside the reference GPU's
    assert "reference: NVIDIA H200, torch 2.14.1, CUDA 13.0" in page
    assert "Why is <code>x</code> so <b>slow</b>?" in page  # the question, from the notebook
    assert "RuntimeError: deliberate failure" in page and "Machine card" in page
    # Each notebook's timing claims, with the verdict; the run's count at the top.
    assert "<td>x is above 1</td><td>&gt; 1</td><td>2 [2, 2]</td><td>5</td><td class='ok'>holds</td>" in page
    assert "Timing claims: 1 holds, 0 undecided, 0 contradicted." in page
    assert page.count("<section id=") == 2 and "<h2>00 · Good</h2>" in page
    # One plot, embedded, captioned with its section; nothing is fetched from anywhere.
    images = re.findall(r"<img [^>]*src='([^']*)'", page)
    assert len(images) == 1 and images[0].startswith("data:image/png;base64,")
    assert "<figcaption>1 · The measurement</figcaption>" in page
    assert not re.search(r"<(script|link|iframe)\b", page)
    assert not re.search(r"(src|href)=['\"](https?:)?//", page)
    executed = nbformat.read(build / "notebooks" / "00_good.ipynb", as_version=4)
    assert executed.cells[2].metadata.get("tags") == ["injected-parameters"]


@pytest.mark.processes
def test_without_reference_results_the_report_says_so(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _notebook(nbdir / "00_good.ipynb", GOOD)
    assert report.main(str(nbdir), str(tmp_path / "build"), reference_root=tmp_path) == 0
    page = (tmp_path / "build" / "report.html").read_text()
    assert "No reference GPU results are recorded for this notebook yet." in page
    assert "<td>answer</td><td>42</td></tr>" in page


def test_no_notebooks_is_an_error(tmp_path, capsys):
    assert report.main(str(tmp_path), str(tmp_path / "build")) == 1
    assert "no notebooks found" in capsys.readouterr().out


@pytest.mark.processes
def test_a_notebook_that_fails_before_saving_shows_no_earlier_run_of_it(tmp_path):
    """The page says "measured on this run": a record left by an earlier run must not stand in for this one."""
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _notebook(nbdir / "00_good.ipynb", GOOD)
    build = tmp_path / "build"
    assert report.main(str(nbdir), str(build), reference_root=tmp_path) == 0
    assert (build / "results" / "00_good.json").exists()
    _notebook(nbdir / "00_good.ipynb", "raise RuntimeError('fails before it saves')\n" + GOOD)
    assert report.main(str(nbdir), str(build), reference_root=tmp_path) == 1
    assert not (build / "results" / "00_good.json").exists()
    page = (build / "report.html").read_text()
    assert "fails before it saves" in page
    assert "<td>answer</td><td>42</td>" not in page and "x is above 1" not in page
    assert "Timing claims: 0 holds, 0 undecided, 0 contradicted." in page
