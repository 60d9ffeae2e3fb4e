"""labkit.predict.specs.datasheet_table: the datasheets as notebook `start_here` shows them, no NaN cells."""

import pytest

from labkit.predict import specs


def test_a_format_without_units_reads_not_published_and_the_rest_are_the_datasheets_figures():
    table = specs.datasheet_table()
    assert list(table.columns) == ["fp32", "tf32", "bf16", "GB/s", "fp32 ridge", "tf32 ridge", "bf16 ridge"]
    assert list(table.index) == [row.name for row in specs.DATASHEET_ROWS] and table.index.name == "GPU"
    t4 = table.loc["T4"]
    assert (t4["fp32"], t4["GB/s"], t4["fp32 ridge"]) == (8.1, 320.0, 25.3)  # 8.1e12 / 320e9 = 25.31
    assert t4["tf32"] == t4["bf16"] == t4["bf16 ridge"] == specs.NOT_PUBLISHED
    assert table.loc["H100 SXM", "bf16"] == 989.0 and table.loc["H100 SXM", "bf16 ridge"] == 295.2  # 989e12/3350e9
    assert not table.isna().any().any()
    assert "NaN" not in table.to_html() and "NaN" not in table.to_string()


def test_other_formats_int8_in_tops_and_no_ridges():
    table = specs.datasheet_table(("fp8", "int8"), ridges=False, rows=(specs.DATASHEETS["L4"], specs.DATASHEETS["T4"]))
    assert table.to_dict("index") == {
        "L4": {"fp8": 242.5, "int8": 242.5, "GB/s": 300.0},
        "T4": {"fp8": specs.NOT_PUBLISHED, "int8": 130.0, "GB/s": 320.0},
    }


@pytest.mark.parametrize("formats", [("fp64",), ()])
def test_an_unknown_format_is_an_error_that_lists_the_formats(formats):
    with pytest.raises(ValueError, match=r"not datasheet formats; choose from \('fp32', 'tf32', 'bf16'"):
        specs.datasheet_table(formats)


def test_the_a10_is_full_rate_and_the_a10g_is_not_its_datasheet():
    """The A10's figures are NVIDIA's datasheet (dense); the A10G, AWS's part, has 80 SMs at GeForce GA102 rates
    (measured: bf16 matmuls near 70 TFLOP/s, TF32 near 35), so its TF32 is its fp32 figure."""
    table = specs.datasheet_table(("fp32", "tf32", "bf16", "int8"), ridges=False, rows=(
        specs.DATASHEETS["A10"], specs.DATASHEETS["A10G"]))  # fmt: skip
    assert table.to_dict("index") == {
        "A10": {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "int8": 250.0, "GB/s": 600.0},
        "A10G": {"fp32": 35.0, "tf32": 35.0, "bf16": 70.0, "int8": 280.0, "GB/s": 600.0},
    }
    sms, clock_hz = 80, 1.71e9  # the A10G's derivation: per-SM dense FLOP per clock x SMs x clock
    a10g = specs.DATASHEETS["A10G"]
    for per_clock, figure in ((256, a10g.fp32_tflops), (512, a10g.bf16_tflops), (2048, a10g.int8_tops)):
        assert per_clock * sms * clock_hz / 1e12 == pytest.approx(figure, rel=0.002)
    assert specs.datasheet_for("NVIDIA A10") is specs.DATASHEETS["A10"]
    assert specs.datasheet_for("NVIDIA A10G") is a10g


def test_the_float32_ridges_span_what_start_here_solution_3_says():
    """Notebook `start_here`'s solution to exercise 3 quotes the table's float32 ridges: 9.4 (B200) to 106 (L40S)."""
    ridges = specs.datasheet_table(("fp32", "bf16"))
    fp32 = ridges["fp32 ridge"]
    assert (fp32.idxmin(), fp32.min(), fp32.idxmax(), fp32.max()) == ("B200", 9.4, "L40S", 106.0)
    bf16 = ridges["bf16 ridge"][ridges["bf16 ridge"] != specs.NOT_PUBLISHED]
    assert all(bf16[gpu] > fp32[gpu] for gpu in bf16.index), "the 16-bit ridges are higher still"
