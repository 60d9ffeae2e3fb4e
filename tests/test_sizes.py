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
    assert sizes.resolve_profile("auto", device="cuda") == "full"


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
        assert set(by_profile["quick"]) == set(by_profile["full"]), f"{notebook}: quick and full set different knobs"
