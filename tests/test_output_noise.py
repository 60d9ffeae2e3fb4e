"""tests/output_noise.py, the notebook tier's check that outputs read clean, against outputs made to order."""

import sys

import pandas as pd
from output_noise import ROOT, machine_paths, noise


def stream(text, name="stdout"):
    return {"output_type": "stream", "name": name, "text": text}


def shown(value):
    return {"output_type": "display_data", "data": {"text/html": value._repr_html_(), "text/plain": repr(value)}}


def test_a_clean_cell_and_labkits_own_one_line_messages_pass():
    assert machine_paths() and str(ROOT) in machine_paths() and sys.prefix in machine_paths()
    table = pd.DataFrame({"measured ms": [1.5, 2.5]}, index=pd.Index(["a", "b"], name="variant"))
    steps = pd.DataFrame({"loss": [2.0, 1.5]}, index=pd.RangeIndex(2, name="step"))  # a named index means something
    outputs = [
        stream("Claim: x is above 1\n  claimed:   > 1  ->  holds ✓\n"),
        stream("labkit: matmul: IQR is 85% of the median; something else is competing\n", "stderr"),
        shown(table),
        shown(steps),
        shown(table.style.hide(axis="index")),
        stream("reference [results/reference/nvidia-h200/start_here.json]; about 1.3 nanoseconds\n"),
    ]
    assert noise(outputs) == []


def test_a_library_warning_with_this_machines_path_is_caught():
    where = f"{sys.prefix}/lib/python3.11/site-packages/torch/functional.py:505"
    text = f"{where}: UserWarning: torch.meshgrid: in an upcoming release, it will be required\n  return fn()\n"
    found = noise([stream(text, "stderr")])
    assert any(f.startswith("stderr:") for f in found), found
    assert any("a Python warning" in f for f in found), found
    assert any(f"this machine's path {sys.prefix}" in f for f in found), found


def test_a_deprecation_on_stdout_and_a_progress_bar_on_stderr_are_caught():
    assert any("deprecation" in f for f in noise([stream("`foo` is deprecated and will be removed\n")]))
    assert noise([stream("100%|██████████| 4/4 [00:01<00:00]\n", "stderr")])[0].startswith("stderr:")


def test_a_nan_cell_and_an_unnamed_row_number_column_are_caught():
    sheets = pd.DataFrame({"fp32": [8.1, 30.3], "bf16": [None, 121.0]}, index=["T4", "L4"])
    assert any(f.startswith("NaN in a table") for f in noise([shown(sheets)]))
    rows = pd.DataFrame({"claim": ["a", "b", "c"], "verdict": ["holds", "holds", "undecided"]})
    assert noise([shown(rows)]) == ["a table whose first column is an unnamed 0, 1, 2, ... index (hide it or name it)"]
    assert noise([shown(rows.set_index("claim"))]) == []
