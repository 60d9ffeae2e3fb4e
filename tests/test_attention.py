"""labkit.workloads.attention: naive, tiled and fused attention agree; their memory, FLOPs and bytes are exact."""

import pytest
import torch
import torch.nn.functional as F

import labkit
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
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


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
