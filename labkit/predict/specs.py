"""Vendor figures in one table: datasheet ceilings, GPU memory sizes, interconnect links (notebooks `start_here`, `memory`, `multiple_gpus`, `estimating_a_job`).

Every number here is a vendor's published figure (or, where said, derived from one or a typical order of
magnitude); the modules that use them import them from here: :mod:`labkit.instruments.ceilings` (datasheet
ceilings), :mod:`labkit.predict.memory_model` (memory sizes), :mod:`labkit.predict.comm_model` (links).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Datasheet:
    """One GPU's published dense peaks (TFLOP/s; int8 in TOP/s), memory bandwidth (GB/s) and memory (GiB).

    Dense means without 2:4 structured sparsity: the tensor-core rows of NVIDIA's datasheets are printed "with
    sparsity" (an asterisk) and the dense figure is half of it. ``None`` means the GPU has no units for that format
    (a T4 has no bf16, TF32 or fp8 tensor cores). The 16-bit figures are those with fp32 accumulation, what
    PyTorch's matmuls use: GeForce cards run fp32 accumulation at half the rate of fp16 accumulation, and their
    whitepapers print both. ``memory_gib`` is the datasheet's "GB", which for HBM and GDDR parts is binary (an
    "80 GB" H100 has 80 GiB); a device reports 2-9% less, what the driver and ECC keep (PyTorch's out-of-memory
    messages print, e.g., "a total capacity of 14.56 GiB" on a T4 and 44.53 GiB on an L40S), and labkit always
    reads the device's own figure. ``reported_names`` are the names ``torch.cuda.get_device_name`` returns.
    """

    name: str
    reported_names: tuple[str, ...]
    fp32_tflops: float
    tf32_tflops: float | None
    bf16_tflops: float | None
    fp16_tflops: float | None
    fp8_tflops: float | None
    int8_tops: float | None
    bandwidth_gbs: float
    memory_gib: float
    source: str

    def ridge(self, precision: str) -> float | None:
        """FLOP per byte where this GPU turns compute-bound at ``precision`` ("fp32", "tf32", "bf16", ...)."""
        peak = getattr(self, f"{precision}_tflops")
        return None if peak is None else peak * 1e12 / (self.bandwidth_gbs * 1e9)


_ADA = "NVIDIA Ada GPU architecture whitepaper, appendix table"
_AMPERE_GA102 = "NVIDIA Ampere GA102 GPU architecture whitepaper, appendix table"
_RTX_BLACKWELL = "NVIDIA RTX Blackwell GPU architecture whitepaper, appendix table"

# fmt: off
DATASHEET_ROWS: tuple[Datasheet, ...] = (
    Datasheet("T4", ("Tesla T4", "NVIDIA T4"), 8.1, None, None, 65.0, None, 130.0, 320.0, 16,
              "NVIDIA T4 datasheet (Turing: no sparsity, no bf16/TF32; 'mixed precision FP16/FP32 65 TFLOPS')"),
    Datasheet("L4", ("NVIDIA L4",), 30.3, 60.0, 121.0, 121.0, 242.5, 242.5, 300.0, 24,
              "NVIDIA L4 datasheet (sparse 120/242/485 halved)"),
    Datasheet("A10", ("NVIDIA A10",), 31.2, 62.5, 125.0, 125.0, None, 250.0, 600.0, 24,
              "NVIDIA A10 datasheet (sparse 125/250/500 halved; 24 GB GDDR6, 600 GB/s): a datacenter GA102, its "
              "16-bit tensor rate with fp32 accumulation is full (72 SMs x 1,024 FLOP/clock x 1.695 GHz = 125)"),
    Datasheet("A10G", ("NVIDIA A10G",), 35.0, 35.0, 70.0, 70.0, None, 280.0, 600.0, 24,
              "no NVIDIA datasheet (an AWS part, not the A10: the A10's figures do not apply): 24 GB and 600 GB/s "
              "from AWS's G5 page; peaks derived from its 80 SMs (AWS: 80 RT cores, one per SM) at 1.71 GHz with "
              "GeForce GA102's dense per-SM rates (GA102 whitepaper, RTX 3090: 256 fp32 and TF32, 512 16-bit at "
              "fp32 accumulation, 2,048 int8 per clock). A published A10G run (PyTorch 2.7; GitHub zzc0721/torch-"
              "performance-test-data, issue 126) measured 69.5 TFLOP/s bf16 and 34.7 TF32 matmuls: 99% of these, "
              "half of a full-rate part's. int8 is derived, not measured"),
    Datasheet("RTX 3090", ("NVIDIA GeForce RTX 3090",), 35.6, 35.6, 71.0, 71.0, None, 284.0, 936.0, 24,
              _AMPERE_GA102),
    Datasheet("RTX 4090", ("NVIDIA GeForce RTX 4090",), 82.6, 82.6, 165.2, 165.2, 330.3, 660.6, 1008.0, 24, _ADA),
    Datasheet("RTX 5090", ("NVIDIA GeForce RTX 5090",), 104.8, 104.8, 209.5, 209.5, 419.0, 838.0, 1792.0, 32,
              _RTX_BLACKWELL),
    Datasheet("RTX PRO 6000 Blackwell",
              ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
              125.0, 250.0, 500.0, 500.0, 1000.0, 1000.0, 1792.0, 96,
              "NVIDIA RTX PRO 6000 Blackwell datasheet: 125 TFLOPS fp32, 4,000 AI TOPS (fp4, sparse), 1,792 GB/s; "
              "the dense tensor figures halve 4,000 for sparsity and again per doubling of precision, TF32 at half "
              "the 16-bit rate as on every NVIDIA tensor core (a professional card accumulates in fp32 at full rate). The Max-Q edition (300 W) is slower and has no row"),
    Datasheet("L40S", ("NVIDIA L40S",), 91.6, 183.0, 362.05, 362.05, 733.0, 733.0, 864.0, 48,
              "NVIDIA L40S datasheet (dense column)"),
    Datasheet("A100 40GB", ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"), 19.5, 156.0, 312.0, 312.0, None,
              624.0, 1555.0, 40, "NVIDIA A100 datasheet (40GB: 1,555 GB/s)"),
    Datasheet("A100 80GB PCIe", ("NVIDIA A100 80GB PCIe",), 19.5, 156.0, 312.0, 312.0, None, 624.0, 1935.0, 80,
              "NVIDIA A100 datasheet (80GB PCIe: 1,935 GB/s)"),
    Datasheet("A100 80GB SXM", ("NVIDIA A100-SXM4-80GB",), 19.5, 156.0, 312.0, 312.0, None, 624.0, 2039.0, 80,
              "NVIDIA A100 datasheet (80GB SXM: 2,039 GB/s)"),
    Datasheet("H100 PCIe", ("NVIDIA H100 PCIe",), 51.0, 378.0, 756.5, 756.5, 1513.0, 1513.0, 2000.0, 80,
              "NVIDIA H100 datasheet, PCIe column (sparse 756/1,513/3,026 halved)"),
    Datasheet("H100 SXM", ("NVIDIA H100 80GB HBM3",), 67.0, 494.5, 989.0, 989.0, 1979.0, 1979.0, 3350.0, 80,
              "NVIDIA H100 datasheet, SXM column (sparse 989/1,979/3,958 halved; the Hopper whitepaper's dense "
              "bf16 figure is 989.4)"),
    Datasheet("H100 NVL", ("NVIDIA H100 NVL",), 60.0, 417.5, 835.5, 835.5, 1670.5, 1670.5, 3900.0, 94,
              "NVIDIA H100 datasheet, NVL column (sparse 835/1,671/3,341 halved)"),
    Datasheet("H200", ("NVIDIA H200",), 67.0, 494.5, 989.0, 989.0, 1979.0, 1979.0, 4800.0, 141,
              "NVIDIA H200 datasheet, SXM column (compute as H100 SXM; 141 GB, 4.8 TB/s)"),
    Datasheet("H200 NVL", ("NVIDIA H200 NVL",), 60.0, 417.5, 835.5, 835.5, 1670.5, 1670.5, 4800.0, 141,
              "NVIDIA H200 datasheet, NVL column"),
    Datasheet("B200", ("NVIDIA B200",), 75.0, 1125.0, 2250.0, 2250.0, 4500.0, 4500.0, 8000.0, 180,
              "NVIDIA DGX/HGX B200 datasheets, per GPU (the 8-GPU figures, 'with sparsity', divided by 8 and halved:"
              " bf16 36 PFLOPS -> 2.25, TF32 18 -> 1.125, fp8 72 -> 4.5; fp32 600 TFLOPS -> 75; 1,440 GB and "
              "64 TB/s -> 180 GB and 8 TB/s)"),
    Datasheet("MI300X", ("AMD Instinct MI300X", "AMD Instinct MI300X VF"), 163.4, 653.7, 1307.4, 1307.4, 2614.9,
              2614.9, 5300.0, 192, "AMD Instinct MI300X datasheet (dense figures; 192 GB HBM3, 5.3 TB/s)"),
)
# fmt: on
DATASHEETS: dict[str, Datasheet] = {row.name: row for row in DATASHEET_ROWS}


def _normal(name: str) -> str:
    return re.sub(r"\s+", " ", name.strip().lower())


_BY_REPORTED = {_normal(n): row for row in DATASHEET_ROWS for n in (*row.reported_names, row.name)}


def datasheet_for(device_name: str) -> Datasheet | None:
    """The datasheet row of a GPU by the name its device reports (``torch.cuda.get_device_name``), or ``None``.

    Taught in notebook `start_here`. The match is on the whole name (case and spacing aside), never a part of it:
    an "RTX 4090 Laptop GPU" or an "RTX 3090 Ti" is a different chip from the card whose name it contains, and gets
    ``None`` (no datasheet) rather than another card's figures.
    """
    if not isinstance(device_name, str):
        raise TypeError(f"device_name must be a string (a GPU's reported name), got {type(device_name).__name__}")
    return _BY_REPORTED.get(_normal(device_name))


NOT_PUBLISHED = "not published"  # a datasheet table's cell where the vendor gives no figure (no such units)
_TABLE_FORMATS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


def datasheet_table(
    formats: tuple[str, ...] = ("fp32", "tf32", "bf16"),
    ridges: bool = True,
    rows: tuple[Datasheet, ...] = DATASHEET_ROWS,
    digits: int = 1,
) -> Any:
    """The datasheets as a table (a pandas DataFrame, one row per GPU): dense peaks in TFLOP/s (int8 in TOP/s),
    bandwidth in GB/s and, with ``ridges``, each format's ridge point in FLOP/byte.

    Taught in notebook `start_here`. A format a GPU has no units for reads "not published" (a T4's bf16 and TF32),
    not NaN: there is no figure to read, and a blank or a NaN reads as a missing measurement.
    """
    import pandas as pd

    unknown = [f for f in formats if f not in _TABLE_FORMATS]
    if unknown or not formats:
        raise ValueError(f"formats {unknown or '(none)'} are not datasheet formats; choose from {_TABLE_FORMATS}")

    def cell(value: float | None) -> object:
        return NOT_PUBLISHED if value is None else round(value, digits)

    def row(sheet: Datasheet) -> dict[str, object]:
        peaks = {f: cell(getattr(sheet, f"{f}_tops" if f == "int8" else f"{f}_tflops")) for f in formats}
        ridge = {f"{f} ridge": cell(sheet.ridge(f)) for f in formats if ridges and f != "int8"}
        return peaks | {"GB/s": cell(sheet.bandwidth_gbs)} | ridge

    return pd.DataFrame([row(sheet) for sheet in rows], index=pd.Index([sheet.name for sheet in rows], name="GPU"))


# GPU memory in GiB (2**30 bytes). The "GB" of HBM parts are binary: an "80 GB" H100 has 80 GiB of HBM3 and a
# "141 GB" H200 141 GiB of HBM3e, and the driver keeps part of it, so a device reports a little less (the NVIDIA
# H200 this project recorded reports 139.8 GiB, 150.1e9 bytes: results/reference/nvidia-h200). Reading "141 GB" as
# 141e9 bytes would lose 9 GB. Where a device's reported figure is recorded it is used; otherwise the datasheet
# figure is read as GiB, an upper bound. Sources: the vendors' datasheets (NVIDIA A100, H100, H100 NVL, GH200,
# H200, HGX B200 (1,440 GB for 8 GPUs) and HGX B300 (2.3 TB for 8); AMD Instinct MI300X and MI325X). The B200 rows
# here are the HGX part: the same chip in a GB200 NVL72 rack has 186 GB (13.4 TB for 72 GPUs, NVIDIA's GB200 NVL72
# specifications; "GB200-186GB" in NVIDIA's MLPerf system names).
GPU_MEMORY_GIB: dict[str, float] = {
    "24 GiB (RTX 4090, L4)": 24,
    "48 GiB (L40S, RTX 6000 Ada)": 48,
    "80 GiB (A100 80GB, H100)": 80,
    "94 GiB (H100 NVL)": 94,
    "96 GiB (GH200)": 96,
    "139.8 GiB (H200, as reported)": 139.8,
    "180 GiB (B200 in an HGX B200)": 180,
    "192 GiB (MI300X)": 192,
    "256 GiB (MI325X)": 256,
    "288 GiB (B300 in an HGX B300)": 288,
}
H200_REPORTED_GIB = 139.8  # total_memory of the recorded NVIDIA H200 (card in results/reference/nvidia-h200)

# Vendors' per-direction figures; the latencies are typical orders of magnitude, not datasheet values.
LINK_SPECS: dict[str, tuple[float, float, str]] = {  # name: (bytes/s per direction, latency s, source)
    "NVLink 4 (H100/H200 SXM)": (450e9, 5e-6, "NVIDIA: 900 GB/s total per GPU"),
    "PCIe 5.0 x16": (64e9, 10e-6, "PCI-SIG: 64 GB/s per direction"),
    "InfiniBand NDR 400G": (50e9, 10e-6, "NVIDIA: 400 Gb/s per port"),
    "Ethernet 10G": (1.25e9, 50e-6, "10 Gb/s"),
}
