"""Vendor figures in one table: datasheet ceilings, GPU memory sizes, interconnect links (notebooks 00, 04, 06, 13).

Every number here is a vendor's published figure (or, where said, a typical order of magnitude); the modules that
use them import them from here: :mod:`labkit.ceilings` (datasheet ceilings), :mod:`labkit.memory_model` (memory
sizes), :mod:`labkit.comm_model` (links).
"""

from __future__ import annotations

# Published dense peak figures (no sparsity) for a few datacenter GPUs (SXM boards), to compare a measured
# ceiling with its datasheet. Sources: NVIDIA's A100, H100 and H200 datasheets. Their tensor-core rows are printed
# "with sparsity"; the dense figure is half of it (H100/H200 bf16 1,979 -> 989, TF32 989 -> 494.5; A100 TF32 312
# -> 156, bf16 624 -> 312). fp32 is the plain (non-tensor-core) figure; TF32 is float32 matmul on tensor cores.
DATASHEETS: dict[str, dict[str, float]] = {
    "H200": {"bf16_tflops": 989.0, "tf32_tflops": 494.5, "fp32_tflops": 67.0, "bandwidth_gbs": 4800.0},
    "H100 80GB HBM3": {"bf16_tflops": 989.0, "tf32_tflops": 494.5, "fp32_tflops": 67.0, "bandwidth_gbs": 3350.0},
    "A100-SXM4-80GB": {"bf16_tflops": 312.0, "tf32_tflops": 156.0, "fp32_tflops": 19.5, "bandwidth_gbs": 2039.0},
}

# Vendors' memory sizes (1 GB = 10⁹ bytes) of common GPUs, for the "will it fit?" calculator.
GPU_MEMORY_GB = {
    "24 GB (RTX 4090, L4)": 24,
    "48 GB (L40S, RTX 6000 Ada)": 48,
    "80 GB (A100 80GB, H100)": 80,
    "94 GB (H100 NVL)": 94,
    "96 GB (GH200)": 96,
    "141 GB (H200)": 141,
}

# Vendors' per-direction figures; the latencies are typical orders of magnitude, not datasheet values.
LINK_SPECS: dict[str, tuple[float, float, str]] = {  # name: (bytes/s per direction, latency s, source)
    "NVLink 4 (H100/H200 SXM)": (450e9, 5e-6, "NVIDIA: 900 GB/s total per GPU"),
    "PCIe 5.0 x16": (64e9, 10e-6, "PCI-SIG: 64 GB/s per direction"),
    "InfiniBand NDR 400G": (50e9, 10e-6, "NVIDIA: 400 Gb/s per port"),
    "Ethernet 10G": (1.25e9, 50e-6, "10 Gb/s"),
}
