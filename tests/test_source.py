import pytest

from labkit import show_source
from labkit.serving import engine


def test_show_source_prints_the_function_holding_the_quoted_line(capsys):
    printed = show_source(engine.Engine.schedule, 'if self.policy == "continuous" or not (running or prefilling):')
    assert printed == capsys.readouterr().out.removesuffix("\n")
    assert printed.lstrip().startswith("def schedule(")


def test_show_source_refuses_a_quote_the_code_does_not_hold(capsys):
    with pytest.raises(ValueError, match="does not hold the quoted line"):
        show_source(engine.Engine.serve, 'if self.policy == "continuous" or not (running or prefilling):')
    assert capsys.readouterr().out == ""  # nothing misleading was printed first
    with pytest.raises(ValueError, match="at least one quoted line"):
        show_source(engine.Engine.schedule)
    with pytest.raises(TypeError, match="function or method"):
        show_source("Engine.schedule", "x")
