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


@pytest.mark.parametrize("doc", ["README.md", "docs/instructor.md"])
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
