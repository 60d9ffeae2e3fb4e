import pytest

from labkit import show_source
from labkit.serving import engine


def test_show_source_prints_the_function_holding_the_quoted_line(capsys):
    assert show_source(engine.Engine.schedule, 'if self.policy == "continuous" or not (running or prefilling):') is None
    printed = capsys.readouterr().out  # printed once, and returns nothing for Jupyter to show a second time
    assert printed.lstrip().startswith("def schedule(") and printed.count("def schedule(") == 1


def test_show_source_refuses_a_quote_the_code_does_not_hold(capsys):
    with pytest.raises(ValueError, match="does not hold the quoted line"):
        show_source(engine.Engine.serve, 'if self.policy == "continuous" or not (running or prefilling):')
    assert capsys.readouterr().out == ""  # nothing misleading was printed first
    with pytest.raises(ValueError, match="at least one quoted line"):
        show_source(engine.Engine.schedule)
    with pytest.raises(TypeError, match="function or method"):
        show_source("Engine.schedule", "x")
