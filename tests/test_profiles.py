import pytest

from labkit import profiles


def test_explicit_profiles_pass_through(monkeypatch):
    monkeypatch.setenv(profiles.PROFILE_ENV, "full")
    assert profiles.resolve_profile("quick") == "quick"
    assert profiles.resolve_profile("FULL") == "full"


def test_auto_uses_environment_then_device(monkeypatch):
    monkeypatch.setenv(profiles.PROFILE_ENV, "full")
    assert profiles.resolve_profile("auto") == "full"
    monkeypatch.delenv(profiles.PROFILE_ENV)
    assert profiles.resolve_profile("auto", device="cpu") == "quick"
    assert profiles.resolve_profile("auto", device="cuda") == "full"


def test_unknown_profile_lists_allowed():
    with pytest.raises(ValueError, match=r"unknown profile 'quik'; allowed: quick, full, auto"):
        profiles.resolve_profile("quik")


def test_bad_environment_profile(monkeypatch):
    monkeypatch.setenv(profiles.PROFILE_ENV, "fast")
    with pytest.raises(ValueError, match="LABKIT_PROFILE='fast' is not allowed; allowed: quick, full"):
        profiles.resolve_profile("auto")


def test_settings(root):
    s = profiles.settings("00_start_here", "quick")
    assert s.profile == "quick" and s.matmul_n > 0
    with pytest.raises(KeyError, match="known:"):
        profiles.settings("99_nothing", "quick")
    with pytest.raises(ValueError, match="resolved"):
        profiles.settings("00_start_here", "auto")


def test_every_sized_notebook_exists_and_has_both_profiles(root):
    names = {p.stem for p in (root / "notebooks").glob("*.ipynb")}
    for notebook, sizes in profiles.SIZES.items():
        assert notebook in names, f"profiles.SIZES names {notebook}, which is not in notebooks/"
        assert set(sizes) == {"quick", "full"}
        assert set(sizes["quick"]) == set(sizes["full"]), f"{notebook}: quick and full set different knobs"
