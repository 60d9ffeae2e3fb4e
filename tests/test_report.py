import json

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from labkit import report

GOOD = """import labkit
log = labkit.ResultLog("00_good", labkit.machine_card("cpu", profile=labkit.resolve_profile(PROFILE)))
log.headline(answer=42)
log.save()"""


def _notebook(path, body):
    params = new_code_cell('PROFILE = "auto"')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_report_runs_every_notebook_and_reports_failures(tmp_path):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    _notebook(nbdir / "00_good.ipynb", GOOD)
    _notebook(nbdir / "01_bad.ipynb", "raise RuntimeError('deliberate failure')")
    code = report.main(str(nbdir), str(tmp_path / "build"), profile="quick")
    assert code == 1  # one notebook failed

    runs = json.loads((tmp_path / "build" / "runs.json").read_text())
    assert [(r["notebook"], r["status"]) for r in runs] == [("00_good", "ok"), ("01_bad", "failed")]
    assert "deliberate failure" in runs[1]["error"]

    page = (tmp_path / "build" / "report.html").read_text()
    assert "answer: 42" in page  # the headline from the notebook's ResultLog
    assert "failed" in page and "Machine card" in page and "<iframe srcdoc=" in page
    executed = nbformat.read(tmp_path / "build" / "notebooks" / "00_good.ipynb", as_version=4)
    assert executed.cells[1].metadata.get("tags") == ["injected-parameters"]


def test_no_notebooks_is_an_error(tmp_path, capsys):
    assert report.main(str(tmp_path), str(tmp_path / "build")) == 1
    assert "no notebooks found" in capsys.readouterr().out
