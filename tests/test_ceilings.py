import pytest
import torch

from labkit.instruments import ceilings
from labkit.predict import specs


def test_roofline_arithmetic():
    roof = ceilings.Roofline(peak_flops=100e9, bandwidth=10e9)
    assert roof.ridge_intensity == 10
    assert roof.attainable(1) == 10e9
    assert roof.attainable(1000) == 100e9
    assert roof.bound(0.5) == "memory-bound" and roof.bound(20) == "compute-bound"
    # 1 GFLOP and 1 GB: moving the bytes (0.1 s) takes longer than the maths (0.01 s)
    assert roof.predict_seconds(1e9, 1e9) == pytest.approx(0.1)


def test_roofline_from_both_measured_ceilings():
    roof = ceilings.measure_roofline("cpu", min_run_s=0.05, n=128, mib=8)
    assert roof.peak_flops > 0 and roof.bandwidth > 0 and roof.label == "float32 roofline"


def test_measured_ceilings_are_rates_from_their_timings():
    mm = ceilings.measure_matmul_ceiling("cpu", torch.float32, n=128, min_run_s=0.05)
    assert mm.value == pytest.approx(2 * 128**3 / mm.timing.median_s)
    assert mm.unit == "FLOP/s" and mm.size == "128x128"
    bw = ceilings.measure_copy_bandwidth("cpu", mib=8, min_run_s=0.05)
    assert bw.value == pytest.approx(2 * 8 * 2**20 / bw.timing.median_s)
    assert bw.to_dict()["unit"] == "B/s"


def test_dtype_choice_and_datasheets():
    assert ceilings.low_precision_dtype("cpu") == torch.bfloat16
    assert ceilings.datasheet_for("NVIDIA H200").bf16_tflops == 989.0
    assert ceilings.datasheet_for("a laptop") is None


# The figures the datasheets print "with sparsity" (TF32, bf16, fp8 TFLOP/s) where they print no dense column
# (the L40S's prints both): every dense figure is half of them.
PRINTED_SPARSE = {
    "L4": (120, 242, 485),
    "A100 40GB": (312, 624, None),
    "A100 80GB SXM": (312, 624, None),
    "H100 PCIe": (756, 1513, 3026),
    "H100 SXM": (989, 1978, 3958),  # bf16 printed 1,979; dense 989 (Hopper whitepaper: 989.4)
    "H100 NVL": (835, 1671, 3341),
    "H200": (989, 1978, 3958),
    "H200 NVL": (835, 1671, 3341),
    "B200": (2250, 4500, 9000),  # the HGX B200's 8-GPU figures (18, 36, 72 PFLOPS) divided by 8
}


@pytest.mark.parametrize("row", specs.DATASHEET_ROWS, ids=lambda r: r.name)
def test_every_datasheet_row_is_found_by_the_names_its_device_reports_and_is_consistent(row):
    for reported in row.reported_names:
        assert ceilings.datasheet_for(reported) is row
        assert ceilings.datasheet_for(f"  {reported.upper()} ") is row  # case and spacing do not matter
        assert ceilings.datasheet_for(f"{reported} Laptop GPU") is None  # a different chip: no row, not this one
    assert row.fp32_tflops > 0 and row.bandwidth_gbs > 0 and row.memory_gib > 0 and row.source
    tensor = [p for p in (row.tf32_tflops, row.bf16_tflops, row.fp8_tflops) if p is not None]
    assert tensor == sorted(tensor), "each halving of precision at least keeps the rate"
    if row.bf16_tflops is not None:
        assert row.bf16_tflops == row.fp16_tflops
        assert row.bf16_tflops >= 2 * row.fp32_tflops - 0.5  # tensor cores: at least twice fp32 (figures rounded)
    if row.name in PRINTED_SPARSE:
        printed = [p / 2 if p else None for p in PRINTED_SPARSE[row.name]]
        assert [row.tf32_tflops, row.bf16_tflops, row.fp8_tflops] == pytest.approx(printed, abs=0.51)
    bf16 = ceilings.datasheet_peak_flops("cpu", torch.bfloat16, device_name=row.reported_names[0])
    assert bf16 == (None if row.bf16_tflops is None else row.bf16_tflops * 1e12)
    assert ceilings.datasheet_peak_flops("cpu", torch.float32, device_name=row.reported_names[0]) == (
        row.tf32_tflops * 1e12 if ceilings.tf32_allowed() and row.tf32_tflops else row.fp32_tflops * 1e12
    )


def test_datasheets_know_what_a_t4_lacks_and_a_geforce_card_accumulates_slower():
    t4 = ceilings.datasheet_for("Tesla T4")
    assert (t4.bf16_tflops, t4.tf32_tflops, t4.fp16_tflops) == (None, None, 65.0)
    assert ceilings.datasheet_peak_flops("cpu", torch.float16, device_name="Tesla T4") == 65e12
    assert ceilings.datasheet_for("NVIDIA GeForce RTX 3090 Ti") is None
    assert ceilings.datasheet_for("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition") is None
    for geforce in ("RTX 3090", "RTX 4090", "RTX 5090"):  # TF32 at the fp32 rate; 16-bit at 2x, not 4x
        row = specs.DATASHEETS[geforce]
        assert row.tf32_tflops == row.fp32_tflops and row.bf16_tflops == pytest.approx(2 * row.fp32_tflops, rel=0.01)
    with pytest.raises(TypeError, match="device_name must be a string"):
        ceilings.datasheet_for(None)


def test_ceiling_calls_turn_round_statistics_into_the_roofline_exactly():
    calls = ceilings.ceiling_calls("cpu", n=64, mib=1)
    assert set(calls.variants) == {ceilings.CEILING_MATMUL, ceilings.CEILING_COPY}
    for fn in calls.variants.values():
        fn()  # both run
    stats = {ceilings.CEILING_MATMUL: 2 * 64**3 / 1e9, ceilings.CEILING_COPY: 2 * 2**20 / 1e10}  # 1 GFLOP/s, 10 GB/s
    assert calls.peak(stats) == pytest.approx(1e9)
    assert calls.bandwidth(stats) == pytest.approx(1e10)
    assert calls.predict_seconds(stats, 2e9, 1e9) == pytest.approx(2.0)  # compute-bound: 2 s of FLOPs, 0.1 s of bytes
    assert calls.predict_seconds(stats, 1e6, 1e10) == pytest.approx(1.0)  # memory-bound


def test_tf32_matmuls_switches_tf32_on_inside_the_block_only():
    matmul = torch.backends.cuda.matmul
    read = (lambda: matmul.fp32_precision) if hasattr(matmul, "fp32_precision") else torch.get_float32_matmul_precision
    before = read()
    with ceilings.tf32_matmuls():
        assert read() in ("tf32", "high")
    assert read() == before


def test_datasheet_ridges_are_tens_in_fp32_and_hundreds_with_tensor_cores():
    """What notebook `start_here` teaches from the datasheets: a datacenter GPU's float32 ridge is near a CPU's,
    its tensor cores' far above."""
    for gpu in ("A100 40GB", "A100 80GB SXM", "H100 PCIe", "H100 SXM", "H200", "B200", "MI300X"):
        sheet = specs.DATASHEETS[gpu]
        ridge = {p: sheet.ridge(p) for p in ("fp32", "tf32", "bf16")}
        assert 5 < ridge["fp32"] < 35, gpu
        assert ridge["tf32"] > 4 * ridge["fp32"] and ridge["bf16"] > 100, gpu
    h200 = specs.DATASHEETS["H200"]
    assert (h200.fp32_tflops, h200.tf32_tflops, h200.bf16_tflops, h200.bandwidth_gbs) == (67, 494.5, 989, 4800)
    assert specs.DATASHEETS["T4"].ridge("bf16") is None


def test_datasheet_peak_for_mfu_follows_the_dtype_and_tf32():
    assert ceilings.datasheet_peak_flops("cpu") is None  # no datasheet for a CPU: MFU against the measured ceiling
    assert ceilings.datasheet_peak_flops("cpu", device_name="Some Unknown GPU") is None
    h200 = dict(device_name="NVIDIA H200")
    assert ceilings.datasheet_peak_flops("cpu", torch.bfloat16, **h200) == 989e12
    assert ceilings.datasheet_peak_flops("cpu", torch.float16, **h200) == 989e12
    assert ceilings.datasheet_peak_flops("cpu", torch.float32, **h200) == 67e12  # TF32 off: PyTorch's default
    with ceilings.tf32_matmuls():
        assert ceilings.tf32_allowed()
        assert ceilings.datasheet_peak_flops("cpu", torch.float32, **h200) == 494.5e12
    assert not ceilings.tf32_allowed()
    with pytest.raises(ValueError, match="no datasheet peak for torch.int8"):
        ceilings.datasheet_peak_flops("cpu", torch.int8, **h200)
