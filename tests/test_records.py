import json
import math

import pytest
import torch

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
