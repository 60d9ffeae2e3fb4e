import pytest
import torch
import torch.nn as nn

import labkit
from labkit.instruments import flops
from labkit.workloads import models


@pytest.mark.parametrize("m,k,n", [(512, 256, 128), (1, 1, 1), (33, 7, 5)])
def test_matmul_is_2mnk(m, k, n):
    expected = 2 * m * n * k
    assert flops.count_flops(torch.matmul, torch.randn(m, k), torch.randn(k, n)) == expected
    assert flops.matmul_flops(m, n, k) == expected


def test_batched_matmul_and_linear():
    assert flops.count_flops(torch.bmm, torch.randn(4, 8, 16), torch.randn(4, 16, 32)) == 2 * 4 * 8 * 32 * 16
    layer = nn.Linear(64, 32)  # the bias add is element-wise work, not counted
    assert flops.count_flops(layer, torch.randn(10, 64)) == 2 * 10 * 64 * 32


def test_convolution():
    conv = nn.Conv2d(3, 16, kernel_size=3, padding=1)
    x = torch.randn(2, 3, 8, 8)
    assert flops.count_flops(conv, x) == 2 * 2 * 16 * 8 * 8 * 3 * 3 * 3


def test_backward_of_a_matmul_is_twice_the_forward():
    a = torch.randn(64, 32, requires_grad=True)
    b = torch.randn(32, 16, requires_grad=True)

    def fwd_bwd():
        (a @ b).sum().backward()

    assert flops.count_flops(fwd_bwd) == 3 * 2 * 64 * 32 * 16


def test_mlp_training_step_formula_is_exact():
    mlp = models.MLP(20, 30, 2, 5)
    x, y = torch.randn(8, 20), torch.randint(0, 5, (8,))

    def step():
        nn.functional.cross_entropy(mlp(x), y).backward()

    assert flops.count_flops(step) == models.mlp_training_flops(mlp.widths, 8)
    assert flops.count_flops(mlp, x) == models.mlp_forward_flops(mlp.widths, 8)


def test_resnet18_counts_3_63_gflops_which_papers_call_1_8():
    net = models.torchvision_model("resnet18")
    with torch.no_grad():
        total = flops.count_flops(net, torch.randn(1, 3, 224, 224))
    assert total == 3_628_146_688
    assert round(total / 2 / 1e9, 1) == 1.8  # multiply-adds, the ResNet paper's "FLOPs"


def test_by_operator_and_intensity():
    by_op = flops.flops_by_operator(torch.mm, torch.randn(4, 4), torch.randn(4, 4))
    assert by_op == {"mm": 128}
    assert flops.arithmetic_intensity(100, 50) == 2
    with pytest.raises(ValueError, match="positive"):
        flops.arithmetic_intensity(1, 0)
    with pytest.raises(TypeError, match="fn_or_module must be a function or a model to call"):
        flops.count_flops("resnet")


def test_attention_is_counted_on_cpu_too():
    q, k, v = (torch.randn(2, 4, 128, 32, requires_grad=True) for _ in range(3))
    forward = 2 * (2 * 2 * 4 * 128 * 128 * 32)  # q @ k^T and scores @ v
    assert flops.count_flops(torch.nn.functional.scaled_dot_product_attention, q, k, v) == forward

    def fwd_bwd():
        torch.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()

    assert flops.count_flops(fwd_bwd) == forward + 2 * forward + forward // 2  # backward recomputes the scores


def test_memory_traffic_counts_reads_and_writes_but_not_views():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    assert flops.count_memory_traffic(torch.matmul, a, b) == 4 * (64 * 32 + 32 * 16 + 64 * 16)
    x = torch.randn(1000)
    assert flops.count_memory_traffic(torch.add, x, x) == 4 * 1000 * 2  # one distinct input read, one output written
    assert flops.count_memory_traffic(lambda t: t.view(10, 100).transpose(0, 1), x) == 0
    layer = nn.Linear(64, 32)
    xb = torch.randn(8, 64)
    with torch.no_grad():
        traffic = flops.count_memory_traffic(layer, xb)
    assert traffic == 4 * (8 * 64 + 64 * 32 + 32 + 8 * 32)  # input, weight, bias, output
    with pytest.raises(TypeError, match="module or a callable"):
        flops.count_memory_traffic(3)


def test_multihead_attention_fast_path_counts_like_the_slow_path():
    mha = nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = torch.randn(2, 10, 64)
    slow = flops.count_flops(lambda: mha(x, x, x, need_weights=False))  # grad enabled: the composite path
    with torch.no_grad():
        fast = flops.count_flops(lambda: mha(x, x, x, need_weights=False))  # the fused inference path
    assert fast == slow == 4 * (2 * 2 * 10 * 64 * 64) + 2 * (2 * 2 * 10 * 10 * 64)
    vit = models.torchvision_model("vit_b_16").eval()
    with torch.no_grad():
        assert round(flops.count_flops(vit, torch.randn(1, 3, 224, 224)) / 2e9, 1) == 17.6  # DeiT/ViT-B: "17.6 GFLOPs"


def test_attention_training_flops_per_token_is_what_the_counter_counts():
    gpt = models.TinyGPT(vocab=64, max_len=32, d_model=32, n_layers=2, n_heads=4)
    idx = torch.randint(0, 64, (2, 32))
    per_token = flops.count_flops(
        lambda: torch.nn.functional.cross_entropy(gpt(idx).flatten(0, 1), idx.flatten()).backward()
    )
    n_matmul = sum(m.weight.numel() for m in gpt.modules() if isinstance(m, torch.nn.Linear))
    assert per_token == idx.numel() * (6 * n_matmul + labkit.attention_training_flops_per_token(2, 32, 32))
    assert labkit.attention_training_flops_per_token(2, 32, 32) == 14 * 2 * 32 * 32
    with pytest.raises(ValueError, match="context must be a positive integer"):
        labkit.attention_training_flops_per_token(2, 0, 32)
