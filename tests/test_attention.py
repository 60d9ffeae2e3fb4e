"""labkit.workloads.attention: naive, tiled and fused attention agree; their memory, FLOPs and bytes are exact."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

import labkit
from labkit.core import compat
from labkit.core.device import cpu_caches
from labkit.workloads import attention

SHAPES = [(4, 256, 64, 64), (2, 384, 32, 128), (3, 300, 16, 128), (2, 100, 64, 128), (1, 40, 64, 16)]


def qkv(bh, t, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(bh, t, d, generator=g) for _ in range(3)]


@pytest.mark.parametrize("bh, t, d, block", SHAPES)
def test_naive_and_tiled_equal_the_fused_kernel(bh, t, d, block):
    q, k, v = qkv(bh, t, d)
    fused = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(attention.naive_attention(q, k, v), fused, atol=1e-5, rtol=0)
    torch.testing.assert_close(attention.tiled_attention(q, k, v, block), fused, atol=1e-5, rtol=0)


def test_the_online_softmax_survives_scores_that_would_overflow_exp():
    q, k, v = qkv(2, 96, 16)
    q = q * 400  # scores in the thousands: exp() of them is inf unless the running maximum is subtracted
    out = attention.tiled_attention(q, k, v, 32)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-4, rtol=0)


@pytest.mark.parametrize("bh, t, d, block", SHAPES)
def test_peak_memory_is_predicted_to_the_byte(bh, t, d, block):
    q, k, v = qkv(bh, t, d)
    inputs = 3 * q.nbytes
    naive = labkit.peak_memory(attention.naive_attention, q, k, v).peak_bytes - inputs
    tiled = labkit.peak_memory(attention.tiled_attention, q, k, v, block).peak_bytes - inputs
    assert naive == attention.naive_peak_bytes(bh, t, d)
    assert tiled == attention.tiled_peak_bytes(bh, t, d, block)


def test_the_naive_peak_is_quadratic_and_the_tiled_one_linear():
    naive = [attention.naive_peak_bytes(4, t, 64) for t in (1024, 2048)]
    tiled = [attention.tiled_peak_bytes(4, t, 64, 128) for t in (1024, 2048)]
    assert naive[1] == 4 * naive[0] and naive[0] == 8 * 4 * 1024**2
    assert tiled[1] - tiled[0] == 4 * 4 * 1024 * 64  # only the output grows: T·d more per head


def test_flops_are_the_same_for_all_three_and_equal_the_formula():
    q, k, v = qkv(2, 128, 32)
    expected = attention.attention_flops(2, 128, 32)
    assert expected == 4 * 2 * 128**2 * 32
    for fn, args in (
        (attention.naive_attention, (q, k, v)),
        (attention.tiled_attention, (q, k, v, 32)),
        (F.scaled_dot_product_attention, (q, k, v)),
    ):
        assert labkit.count_flops(fn, *args) == expected


@pytest.mark.parametrize("rows, columns", [(64, 1000), (3, 7)])
def test_softmax_traffic_equals_the_byte_counter(rows, columns):
    x = torch.randn(rows, columns)
    assert labkit.count_memory_traffic(torch.softmax, x, -1) == attention.softmax_traffic_bytes(rows, columns, True)
    unfused = labkit.count_memory_traffic(attention.unfused_softmax, x)
    assert unfused == attention.softmax_traffic_bytes(rows, columns, False) == 4 * (8 * rows * columns + 4 * rows)
    torch.testing.assert_close(attention.unfused_softmax(x), torch.softmax(x, -1))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: attention.naive_attention(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3)), "3-D tensor"),
        (lambda: attention.tiled_attention(*qkv(1, 8, 4)[:2], torch.zeros(1, 9, 4)), "one shape"),
        (lambda: attention.tiled_attention(*qkv(1, 8, 4), block=0), "block"),
        (lambda: attention.tiled_peak_bytes(1, 8, 4, 2.5), "block"),
        (lambda: attention.naive_peak_bytes(1, -8, 4), "tokens"),
        (lambda: attention.softmax_traffic_bytes(1, 8, True, itemsize=0), "itemsize"),
        (lambda: attention.sdpa_backend(*qkv(1, 8, 4)[:2], "v"), "v must be a tensor"),
        (lambda: attention.sdpa_backend(*qkv(1, 8, 4), backends="math"), "backends must be .*SDPBackend.MATH"),
        (lambda: attention.sdpa_backend(*qkv(1, 8, 4), backends=[]), "backends must be"),
        (lambda: attention.sdpa_backend_name("aten::_scaled_dot_product_cudnn_attention"), "op_names must be"),
        (lambda: attention.sdpa_backend_name(["aten::mm", "aten::_softmax"]), "no scaled_dot_product_attention"),
        (lambda: attention.sdpa_backend_name([], flash_impl=3), "flash_impl"),
        (lambda: attention.cudnn_version_name("9.19.0"), "version must be a cuDNN version number"),
        (lambda: attention.cudnn_version_name(919), "version must be"),
        (lambda: attention.cudnn_version_name(True), "version must be"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def test_on_a_cpu_the_fused_kernel_is_pytorchs_cpu_flash_kernel_and_math_when_asked():
    q, k, v = qkv(4, 300, 64)
    assert attention.sdpa_backend(q, k, v) == "PyTorch's CPU flash attention"
    assert attention.sdpa_backend(*(x.unsqueeze(0) for x in (q, k, v))) == "PyTorch's CPU flash attention"
    assert attention.sdpa_backend(q, k, v, SDPBackend.MATH) == "math (unfused: the scores in memory)"
    math_first = [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]  # sdpa_kernel enables both; the CPU order decides
    assert attention.sdpa_backend(q, k, v, math_first) == "PyTorch's CPU flash attention"


SDPA = "aten::scaled_dot_product_attention"


@pytest.mark.parametrize(
    "ops, flash_impl, rocm, expected",
    [  # what a profile of one call records, outer operator first (attention.cpp dispatches to one backend)
        ([SDPA, "aten::_scaled_dot_product_cudnn_attention", "aten::_cudnn_attention_forward"], None, False,
         "cuDNN attention"),
        ([SDPA, "aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward"], None, False,
         "FlashAttention-2"),
        ([SDPA, "aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward"], "FA3", False,
         "FlashAttention-3"),
        ([SDPA, "aten::_scaled_dot_product_efficient_attention", "aten::_efficient_attention_forward"], None, False,
         "memory-efficient attention (xFormers' kernel)"),
        ([SDPA, "aten::_scaled_dot_product_attention_math", "aten::matmul", "aten::_softmax"], None, False,
         "math (unfused: the scores in memory)"),
        ([SDPA, "aten::unsqueeze", "aten::_scaled_dot_product_flash_attention_for_cpu"], None, False,
         "PyTorch's CPU flash attention"),
        ([SDPA, "aten::_scaled_dot_product_flash_attention"], None, True,
         "flash attention (AOTriton or Composable Kernel, ROCm)"),
        ([SDPA, "aten::_scaled_dot_product_efficient_attention"], None, True,
         "memory-efficient attention (AOTriton or Composable Kernel, ROCm)"),
        ([SDPA, "aten::_scaled_dot_product_cudnn_attention"], "FA3", False, "cuDNN attention"),
    ],
)  # fmt: skip
def test_each_backend_operator_is_named(ops, flash_impl, rocm, expected):
    assert attention.sdpa_backend_name(ops, flash_impl, rocm) == expected
    assert attention.sdpa_backend_name(iter(ops), flash_impl, rocm) == expected  # any iterable, read once


def test_the_backend_operators_exist_in_this_pytorch():
    missing = [op for op in attention.SDPA_BACKENDS if compat.aten_op(op.removeprefix("aten::")) is None]
    assert not missing, f"aten operators renamed or removed: {missing}"
    assert len(set(attention.SDPA_BACKENDS.values())) == len(attention.SDPA_BACKENDS)  # one name, one kernel


def test_cpu_caches_reads_sysfs_and_skips_instruction_caches(tmp_path):
    for index, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "96M")]
    ):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    assert cpu_caches(tmp_path) == {"L1": 48 * 2**10, "L2": 2 * 2**20, "L3": 96 * 2**20}
    assert cpu_caches(tmp_path / "missing") == {}


@pytest.mark.parametrize(
    "number, name",
    [(91900, "9.19.0"), (91501, "9.15.1"), (90100, "9.1.0"), (92400, "9.24.0"), (8907, "8.9.7"), (8600, "8.6.0")],
)
def test_cudnn_version_numbers_are_decoded_as_cudnn_version_h_encodes_them(number, name):
    # cudnn_version.h: CUDNN_VERSION = major*10000 + minor*100 + patch from cuDNN 9, major*1000 + ... before
    assert attention.cudnn_version_name(number) == name
    major, minor, patch = (int(x) for x in name.split("."))
    assert number == (major * 10000 if major >= 9 else major * 1000) + minor * 100 + patch
