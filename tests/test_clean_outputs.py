"""What labkit does so that a notebook's outputs read clean: tables without row numbers, no torchao note, short paths."""

import logging
from pathlib import Path

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from labkit.lab import records, session

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def shell():
    ip = InteractiveShell.instance()
    try:
        yield ip
    finally:
        InteractiveShell.clear_instance()


def test_a_table_of_row_numbers_is_shown_without_them_and_a_named_index_is_kept(shell, monkeypatch):
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    rows = pd.DataFrame({"batch": [1, 2, 4], "ms": [1.5, 2.5, 4.5]})
    named = rows.set_index("batch")
    before, _ = shell.display_formatter.format(rows)
    assert "<th>0</th>" in before["text/html"] and before["text/plain"].splitlines()[1].startswith("0")
    session._tables_without_row_numbers()
    shown, _ = shell.display_formatter.format(rows)
    assert "<th>0</th>" not in shown["text/html"] and "<td>1</td>" in shown["text/html"]
    assert 'class="dataframe"' in shown["text/html"]
    assert shown["text/plain"].splitlines() == [" batch  ms", "     1 1.5", "     2 2.5", "     4 4.5"]
    kept, _ = shell.display_formatter.format(named)
    assert kept["text/html"] == named._repr_html_() and kept["text/plain"] == repr(named)
    offset = rows.set_axis(pd.RangeIndex(1, 4))  # rows numbered from 1 say something: left as they are
    assert shell.display_formatter.format(offset)[0]["text/plain"] == repr(offset)


def test_outside_ipython_nothing_changes(monkeypatch):
    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    session._tables_without_row_numbers()  # no shell: returns without touching anything


def test_pytorchs_note_about_torchao_is_left_out_and_other_records_pass():
    def record(message: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("torch.utils._pytree", logging.WARNING, "_pytree.py", 630, message, args, None)

    note = record(
        "%s is an Enum subclass and is now natively supported by torch.compile as an opaque value type. Calling "
        "register_constant() on Enum subclasses is deprecated and will be an error in a future release.",
        "<enum 'KernelPreference'>",
    )
    assert session._not_torchaos_enum_note(note) is False
    assert session._not_torchaos_enum_note(record("some other pytree warning")) is True


def test_a_path_is_shown_from_the_checkout_or_the_home_folder():
    assert records.shown_path(ROOT / "build" / "results" / "x_trace.json") == "build/results/x_trace.json"
    if not Path.home().is_relative_to(ROOT):
        assert records.shown_path(Path.home() / "elsewhere" / "t.json") == "~/elsewhere/t.json"
    assert records.shown_path("/nonexistent-root-folder/t.json") == "/nonexistent-root-folder/t.json"
