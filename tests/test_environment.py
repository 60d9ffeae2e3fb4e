"""labkit.core.environment: every LABKIT_* variable in one table, parsed one way, listed in the docs."""

import re
from pathlib import Path

import pytest

from labkit.core import environment

ROOT = Path(__file__).resolve().parents[1]


def test_every_variable_labkit_and_the_tests_read_is_in_the_table():
    used = set()
    for path in [*ROOT.rglob("labkit/**/*.py"), *ROOT.glob("tests/*.py"), ROOT / "Makefile", ROOT / ".ci" / "run"]:
        used |= set(re.findall(r"\bLABKIT_[A-Z_]+\b", path.read_text()))
    assert used == set(environment.SETTINGS), (
        f"missing: {used - set(environment.SETTINGS)}; unused: {set(environment.SETTINGS) - used}"
    )


@pytest.mark.parametrize("doc", ["CONTRIBUTING.md", "docs/instructor.md"])
def test_the_docs_carry_the_same_table(doc):
    text = (ROOT / doc).read_text()
    assert environment.markdown_table() in text, f"{doc} must carry labkit.core.environment.markdown_table() as it is"


def test_values_are_parsed_one_way_and_typos_say_what_is_allowed(monkeypatch):
    monkeypatch.setenv("LABKIT_THREADS", " 3 ")
    assert environment.get("LABKIT_THREADS") == 3
    monkeypatch.setenv("LABKIT_THREADS", "")
    assert environment.get("LABKIT_THREADS") is None
    monkeypatch.setenv("LABKIT_HEADLESS", "1")
    assert environment.get("LABKIT_HEADLESS") is True
    monkeypatch.delenv("LABKIT_MALLOPT", raising=False)
    assert environment.get("LABKIT_MALLOPT") is True
    monkeypatch.setenv("LABKIT_AUDIT_PLOTS", "yes")
    with pytest.raises(ValueError, match=r"LABKIT_AUDIT_PLOTS='yes' is not allowed; allowed: 1, warn, 0"):
        environment.get("LABKIT_AUDIT_PLOTS")
    monkeypatch.setenv("LABKIT_CLAIMS", "strickt")
    with pytest.raises(ValueError, match="allowed: strict"):
        environment.get("LABKIT_CLAIMS")
    with pytest.raises(KeyError, match="not a labkit setting"):
        environment.get("LABKIT_" + "NOTHING")  # built, so the scan above does not count it


def test_labkit_start_checks_every_setting_before_anything_runs(monkeypatch, tmp_path):
    import labkit

    for name in [n for n in environment.SETTINGS if n not in ("LABKIT_PROFILE", "LABKIT_HEADLESS")]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LABKIT_CLAIMS", "bogus")  # read only when a claim is contradicted: caught at the start
    with pytest.raises(ValueError, match=r"LABKIT_CLAIMS='bogus' is not allowed; allowed: strict"):
        labkit.start("start_here", show=False)
    monkeypatch.delenv("LABKIT_CLAIMS")
    a_file = tmp_path / "results.json"
    a_file.write_text("{}")
    monkeypatch.setenv("LABKIT_RESULTS_DIR", str(a_file))
    monkeypatch.setenv("LABKIT_THREADS", "two")
    with pytest.raises(ValueError, match=r"LABKIT_RESULTS_DIR=.* an existing file.*; LABKIT_THREADS='two'"):
        labkit.start("start_here", show=False)  # every bad value at once
    monkeypatch.delenv("LABKIT_RESULTS_DIR")
    monkeypatch.delenv("LABKIT_THREADS")
    misspelt = "LABKIT_" + "PROFIL"
    monkeypatch.setenv(misspelt, "full")
    with pytest.warns(
        UserWarning, match=f"{misspelt} is not a labkit setting and is ignored; did you mean LABKIT_PROFILE"
    ):
        assert environment.check_all() == [misspelt]


def test_a_device_error_says_the_device_came_from_the_environment(monkeypatch):
    from labkit.core import device

    monkeypatch.setenv("LABKIT_DEVICE", "cuda:7")
    if not device.torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"no CUDA GPU.*\(the device came from LABKIT_DEVICE; unset it"):
            device.choose_device("auto")
    monkeypatch.setenv("LABKIT_DEVICE", "gpu")
    with pytest.raises(ValueError, match=r"LABKIT_DEVICE='gpu' is not allowed; allowed: auto, cpu, cuda, cuda:N, mps"):
        device.choose_device("auto")
    assert device.choose_device("cpu").type == "cpu"  # a notebook's explicit DEVICE wins over the variable
