import dataclasses

import pytest

from labkit.lab import sizes


def test_explicit_profiles_pass_through(monkeypatch):
    monkeypatch.setenv(sizes.PROFILE_ENV, "full")
    assert sizes.resolve_profile("quick") == "quick"
    assert sizes.resolve_profile("FULL") == "full"


def test_auto_uses_environment_then_device(monkeypatch):
    monkeypatch.setenv(sizes.PROFILE_ENV, "full")
    assert sizes.resolve_profile("auto") == "full"
    monkeypatch.delenv(sizes.PROFILE_ENV)
    assert sizes.resolve_profile("auto", device="cpu") == "quick"
    monkeypatch.setattr(sizes, "_device_shortfall", lambda device: None)
    assert sizes.resolve_profile("auto", device="cuda") == "full"


def test_auto_keeps_quick_sizes_on_a_gpu_too_small_for_full_and_says_why(monkeypatch):
    monkeypatch.delenv(sizes.PROFILE_ENV, raising=False)
    t4 = sizes.full_profile_shortfall(14.56, 8.1, "Tesla T4")  # as a T4 reports its memory; datasheet fp32
    assert t4 == (
        "this Tesla T4 has 14.6 GiB of memory (the full sizes want 20) and 8.1 TFLOP/s of float32 (the full sizes "
        "want 20)"
    )
    laptop = sizes.full_profile_shortfall(7.6, 22.0, "NVIDIA GeForce RTX 4070 Laptop GPU")
    assert laptop is not None and "7.6 GiB" in laptop and "TFLOP/s" not in laptop
    assert sizes.full_profile_shortfall(22.0, 30.3, "NVIDIA L4") is None  # an L4 runs the full sizes
    assert sizes.full_profile_shortfall(79.2, 67.0, "NVIDIA H100 80GB HBM3") is None
    monkeypatch.setattr(sizes, "_device_shortfall", lambda device: t4)
    profile, why = sizes.choose_profile("auto", "cuda")
    assert (profile, why) == ("quick", f'{t4}: quick sizes (PROFILE = "full" runs the full ones anyway)')
    profile, why = sizes.choose_profile("full", "cuda")  # asked for: obeyed, with the warning
    assert profile == "full" and why.startswith(t4) and "may run out of memory" in why
    assert sizes.choose_profile("auto", "cpu") == ("quick", None)


def test_unknown_profile_lists_allowed():
    with pytest.raises(ValueError, match=r"unknown profile 'quik'; allowed: quick, full, auto"):
        sizes.resolve_profile("quik")


def test_bad_environment_profile(monkeypatch):
    monkeypatch.setenv(sizes.PROFILE_ENV, "fast")
    with pytest.raises(ValueError, match="LABKIT_PROFILE='fast' is not allowed; allowed: quick, full"):
        sizes.resolve_profile("auto")


def test_settings(root):
    s = sizes.settings("start_here", "quick")
    assert s.profile == "quick" and s.matmul_n > 0
    with pytest.raises(KeyError, match="the notebooks are: start_here, inference_vs_training"):
        sizes.settings("99_nothing", "quick")
    with pytest.raises(ValueError, match="resolved"):
        sizes.settings("start_here", "auto")


def test_every_sized_notebook_exists_and_has_both_profiles(root):
    names = {p.stem for p in (root / "notebooks").glob("*.ipynb")}
    for notebook, by_profile in sizes.SIZES.items():
        assert notebook in names, f"sizes.SIZES names {notebook}, which is not in notebooks/"
        assert set(by_profile) == {"quick", "full"}
        assert type(by_profile["quick"]) is type(by_profile["full"]), f"{notebook}: quick and full are one class"
        assert dataclasses.is_dataclass(by_profile["quick"]) and type(by_profile["quick"]).__dataclass_params__.frozen


def test_sizes_are_typed_and_frozen():
    cfg = sizes.settings("batch_size", "quick")
    assert (cfg.notebook, cfg.profile) == ("batch_size", "quick")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.batches = [1]  # type: ignore[misc]
    with pytest.raises(AttributeError, match="batchs"):
        cfg.batchs  # noqa: B018
    assert sizes.settings("start_here", "full").matmul_n == 4096
