import json
import math

import nbformat
import pytest
import torch
from claim_statements import unmade_claims
from conftest import ROOT

from labkit.lab import records


def test_machine_card_names_hardware_software_and_settings():
    card = records.machine_card("cpu", dtype=torch.bfloat16, profile="quick")
    for key in ("device_name", "cpu_cores", "torch_threads", "torch", "torchvision", "python", "created"):
        assert card[key], key
    assert card["dtype"] == "bfloat16" and card["profile"] == "quick"
    assert card["torch"] == torch.__version__
    json.dumps(card)
    assert "torch" in records.card_line(card)


def test_to_jsonable_handles_what_notebooks_produce():
    data = records.to_jsonable(
        {"t": torch.tensor([1.0, 2.0]), "d": torch.float16, "dev": torch.device("cpu"), "nan": math.nan, 3: (1, 2)}
    )
    assert data == {"t": [1.0, 2.0], "d": "torch.float16", "dev": "cpu", "nan": None, "3": [1, 2]}


def test_atomic_write_leaves_old_file_when_serialising_fails(tmp_path):
    path = tmp_path / "r.json"
    records.write_json_atomic(path, {"a": 1})
    with pytest.raises(TypeError):
        records.write_json_atomic(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind


def test_result_log_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv(records.RESULTS_ENV, str(tmp_path))
    log = records.ResultLog("00_test", {"device_name": "cpu"})
    log.add("x", None, seconds=1.5)
    log.headline(tflops=0.4)
    path = log.save()
    assert path == tmp_path / "00_test.json"
    saved = json.loads(path.read_text())
    assert saved["results"]["x"] == {"seconds": 1.5}
    assert saved["summary"] == {"tflops": 0.4}
    assert saved["card"] == {"device_name": "cpu"}


def test_load_reference(tmp_path):
    assert records.load_reference("start_here", root=tmp_path) == []
    ref = tmp_path / "results" / "reference" / "nvidia-h200"
    ref.mkdir(parents=True)
    (ref / "start_here.json").write_text(json.dumps({"card": {"device_name": "H200"}, "summary": {}}))
    found = records.load_reference("start_here", root=tmp_path)
    assert found[0]["card"]["device_name"] == "H200"
    assert found[0]["source_file"] == "results/reference/nvidia-h200/start_here.json"


def _reference_records():
    return sorted((ROOT / records.REFERENCE_DIRNAME).glob("*/*.json"))


@pytest.mark.parametrize("path", _reference_records(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_reference_record_holds_only_claims_its_notebook_still_makes(path):
    """A shipped record is shown beside the learner's run: a claim the notebook no longer makes on that device (a
    statement rewritten, a branch for GPUs changed) is stale and must be re-recorded or dropped, with the record
    saying which (its ``dropped_claims``)."""
    saved = json.loads(path.read_text())
    stale = unmade_claims(ROOT / "notebooks" / f"{path.stem}.ipynb", saved["claims"], saved["card"]["device_type"])
    assert not stale, f"{path.relative_to(ROOT)} holds claims notebook {path.stem} no longer makes: {stale}"
    for dropped in saved.get("dropped_claims", []):
        assert dropped["statement"] and dropped["why"], dropped


def test_the_stale_record_check_catches_a_claim_made_only_on_the_other_device(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            'if device.type == "cpu":\n'
            '    c = Claim(f"at {n} tokens the cache sets the step", ratio("a", "b") > 2)\n'
            "else:\n"
            '    c = Claim(f"a GPU step is launch-bound at {n} tokens", ratio("a", "b") < 2)\n'
            'd = Claim("batch-1 decode is " + ("within 10x of" if device.type == "cpu" else "not far above") + " it",'
            " q < 1)"
        )
    ]
    path = tmp_path / "toy.ipynb"
    nbformat.write(nb, path)
    cpu_claim = {"statement": "at 960 tokens the cache sets the step"}
    gpu_claim = {"statement": "a GPU step is launch-bound at 960 tokens"}
    assert unmade_claims(path, [cpu_claim, gpu_claim], "cpu") == [gpu_claim["statement"]]
    assert unmade_claims(path, [cpu_claim, gpu_claim], "cuda") == [cpu_claim["statement"]]
    assert unmade_claims(path, [{"statement": "batch-1 decode is within 10x of it"}], "cuda") == [
        "batch-1 decode is within 10x of it"
    ]
    assert unmade_claims(path, [{"statement": "batch-1 decode is not far above it"}], "cuda") == []
    assert unmade_claims(path, [{"statement": "something else entirely"}], "cpu") == ["something else entirely"]
