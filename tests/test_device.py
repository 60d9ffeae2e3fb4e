import pytest
import torch

from labkit.core import device as dev


def test_cpu_by_name():
    assert dev.choose_device("cpu") == torch.device("cpu")
    assert dev.choose_device(" CPU ") == torch.device("cpu")


def test_auto_prefers_cuda_then_mps(monkeypatch):
    monkeypatch.delenv(dev.DEVICE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(dev, "_mps_available", lambda: True)
    assert dev.choose_device("auto") == torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert dev.choose_device(None) == torch.device("mps")


def test_auto_falls_back_to_cpu_without_accelerators(monkeypatch):
    monkeypatch.delenv(dev.DEVICE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(dev, "_mps_available", lambda: False)
    assert dev.choose_device("auto") == torch.device("cpu")


def test_environment_overrides_auto(monkeypatch):
    monkeypatch.setenv(dev.DEVICE_ENV, "cpu")
    assert dev.choose_device("auto") == torch.device("cpu")
    monkeypatch.setenv(dev.DEVICE_ENV, "tpu")
    with pytest.raises(ValueError, match="LABKIT_DEVICE='tpu' is not allowed; allowed: auto, cpu, cuda, cuda:N, mps"):
        dev.choose_device("auto")


def test_unknown_device_lists_allowed():
    with pytest.raises(ValueError) as err:
        dev.choose_device("gpu")
    message = str(err.value)
    assert "unknown device 'gpu'" in message
    assert "auto, cpu, cuda, cuda:N, mps" in message
    assert "available here" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_missing_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        dev.choose_device("cuda:0")


def test_sync_and_describe_on_cpu():
    dev.sync("cpu")
    dev.sync(None)
    info = dev.describe("cpu")
    for key in ("device", "device_name", "cpu_cores", "torch_threads", "host_memory_gib", "device_memory_gib"):
        assert key in info
    assert info["cpu_cores"] >= 1
    assert info["torch_threads"] == torch.get_num_threads()
    assert "cpu" in dev.available_devices()
    assert dev.available_memory_bytes("cpu") > 0
