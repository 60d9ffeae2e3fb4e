import pytest

from labkit.lab import widgets


def test_headless_runs_the_function_once_with_its_defaults(monkeypatch):
    monkeypatch.setenv(widgets.HEADLESS_ENV, "1")
    calls = []

    def show(n: int = 3, name: str = "a"):
        calls.append((n, name))

    assert widgets.interact(show, n=(1, 10), name=["a", "b"]) is None
    assert calls == [(3, "a")]


def test_interactive_builds_real_widgets(monkeypatch):
    monkeypatch.delenv(widgets.HEADLESS_ENV, raising=False)
    assert not widgets.headless()
    seen = []
    control = widgets.interact(lambda n=2: seen.append(n), n=(1, 10))
    assert seen == [2]
    assert control.widget.children[0].value == 2


def test_every_parameter_needs_a_starting_value():
    with pytest.raises(TypeError, match="needs a default for n"):
        widgets.interact(lambda n: None, n=(1, 10))
