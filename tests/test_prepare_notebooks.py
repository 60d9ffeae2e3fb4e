"""The notebooks make test runs (tests/prepare_notebooks.py): each as given, its exercises solved after it."""

import nbformat
import pytest
from conftest import NOTEBOOKS
from prepare_notebooks import MARK_LEARNER_END, MARK_LEARNER_START, RUN_SUFFIX, prepare
from solutions import STUB, exercises


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_prepared_notebook_is_the_learners_then_its_solutions_then_the_run_record(path, tmp_path):
    given = nbformat.read(path, as_version=4)
    prepared = nbformat.read(prepare(path, tmp_path), as_version=4)
    assert prepared.cells[0].source == MARK_LEARNER_START, "what listens before the lesson is noted first"
    cells = prepared.cells[1:]
    injected = [i for i, c in enumerate(cells) if "injected-parameters" in c.metadata.get("tags", [])]
    parameters = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
    assert injected == [parameters[0] + 1] and 'PROFILE = "quick"' in cells[injected[0]].source
    learner = [c for i, c in enumerate(cells) if i not in injected][: len(given.cells)]
    assert [(c.cell_type, c.source) for c in learner] == [(c.cell_type, c.source) for c in given.cells]
    checked = [(c.source, c.outputs) for c in given.cells if c.cell_type == "code" and c.outputs]
    assert checked == [(c.source, c.outputs) for c in learner if c.cell_type == "code" and c.outputs], (
        "the checked cells keep their stored outputs, for nbval to compare"
    )

    tail = cells[len(given.cells) + 1 :]
    assert tail[0].source == MARK_LEARNER_END, "the learner's part is timed before the solutions start"
    code = "\n".join(c.source for c in tail if c.cell_type == "code")
    assert not STUB.search(code), "every stub is filled in with its solution"
    n = len(exercises(given))
    assert code.count("the folded solution of") + code.count("the folded prediction of") == n
    assert "def plainly_wrong(" in code
    assert f'"{path.stem}{RUN_SUFFIX}"' in tail[-1].source and "profile_parameter=PROFILE" in tail[-1].source


def test_a_notebook_without_the_profile_parameter_is_refused(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("DEVICE = 'auto'", metadata={"tags": ["parameters"]})],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    path = tmp_path / "99_bare.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(SystemExit, match=r"99_bare.ipynb: its parameters cell does not set \['PROFILE'\]"):
        prepare(path, tmp_path / "out")
