"""Vendor figures in one table: datasheet ceilings, GPU memory sizes, interconnect links (notebooks `start_here`, `memory`, `multiple_gpus`, `estimating_a_job`).

Every number here is a vendor's published figure (or, where said, a typical order of magnitude); the modules that
use them import them from here: :mod:`labkit.instruments.ceilings` (datasheet ceilings), :mod:`labkit.predict.memory_model` (memory
sizes), :mod:`labkit.predict.comm_model` (links).
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

# GPU memory in GiB (2**30 bytes). The "GB" of HBM parts are binary: an "80 GB" H100 has 80 GiB of HBM3 and a
# "141 GB" H200 141 GiB of HBM3e, and the driver keeps part of it, so a device reports a little less (the NVIDIA
# H200 this project recorded reports 139.8 GiB, 150.1e9 bytes: results/reference/nvidia-h200). Reading "141 GB" as
# 141e9 bytes would lose 9 GB. Where a device's reported figure is recorded it is used; otherwise the datasheet
# figure is read as GiB, an upper bound. Sources: the vendors' datasheets (NVIDIA A100, H100, H100 NVL, GH200,
# H200, HGX B200 (1,440 GB for 8 GPUs) and HGX B300 (2.3 TB for 8); AMD Instinct MI300X and MI325X).
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
