"""labkit.workloads.experts and labkit.parallel.expert_parallel: FLOPs, parameters, capacity, drops and experts touched
against their formulas; the expert-parallel layer on two gloo ranks against the whole one."""

import math

import numpy as np
import pytest
import torch

import labkit
from labkit.lab.notebook_sizes import SIZES
from labkit.parallel import distributed, expert_parallel
from labkit.workloads import experts


@pytest.mark.parametrize("n_experts, top_k", [(4, 1), (8, 2), (16, 2), (32, 4)])
def test_flops_and_parameters_equal_the_counter_and_the_formula(n_experts, top_k):
    torch.manual_seed(0)
    layer = experts.MoE(32, 48, n_experts, top_k)
    x = torch.randn(40, 32)
    with torch.no_grad():
        assert labkit.count_flops(layer, x) == experts.moe_flops(40, 32, 48, n_experts, computed=40 * top_k)
    assert labkit.count_parameters(layer) == experts.moe_parameters(32, 48, n_experts)
    assert experts.moe_parameters(32, 48, n_experts) == 32 * n_experts + 3 * 32 * 48 * n_experts
    # a SwiGLU expert is Mixtral's three matrices: w1 and w3 (width x hidden), w2 (hidden x width)
    assert [tuple(w.shape) for w in (layer.w1, layer.w3, layer.w2)] == [(n_experts, 32, 48)] * 2 + [(n_experts, 48, 32)]


def test_an_expert_is_six_width_hidden_flops_per_token_by_the_counter():
    """Mixtral's SwiGLU expert: three matmuls of 2·width·hidden FLOPs per token, nothing else counted."""
    layer = experts.MoE(24, 40, 3)
    x = torch.randn(7, 24)
    with torch.no_grad():
        assert labkit.count_flops(lambda: layer.expert(1, x)) == 6 * 24 * 40 * 7
    assert experts.moe_flops(7, 24, 40, 3, computed=1) - experts.moe_flops(7, 24, 40, 3, computed=0) == 6 * 24 * 40


def _swiglu(x, w1, w3, w2):
    """Mixtral's expert as transformers 4.x's MixtralBlockSparseTop2MLP and mistral_inference's FeedForward write it:
    w2(act_fn(w1(x)) * w3(x)), act_fn SiLU, as Linear layers."""
    act = torch.nn.SiLU()
    lin = torch.nn.functional.linear  # Linear stores (out, in): the transposes of the layer's (in, out) matrices
    return lin(act(lin(x, w1.T)) * lin(x, w3.T), w2.T)


def test_the_layer_equals_a_loop_over_tokens():
    torch.manual_seed(1)
    layer = experts.MoE(16, 24, 6, top_k=2)
    x = torch.randn(10, 16)
    with torch.no_grad():
        out = layer(x)
        chosen, weights = layer.route(x)
        for t in range(10):
            expected = sum(
                weights[t, j] * _swiglu(x[t], *(w[chosen[t, j]] for w in (layer.w1, layer.w3, layer.w2)))
                for j in range(2)
            )
            torch.testing.assert_close(out[t], expected, atol=1e-5, rtol=1e-5)


def test_capacity_drops_the_excess_and_the_counter_sees_only_what_was_kept():
    torch.manual_seed(2)
    layer = experts.MoE(32, 16, 8, top_k=2, capacity_factor=1.0)
    x = torch.randn(128, 32)
    with torch.no_grad():
        counted = labkit.count_flops(layer, x)
    r = layer.last_routing
    assert r.capacity == experts.expert_capacity(128, 8, 2, 1.0) == 32
    assert sum(r.assigned) == 256 and all(k == min(n, 32) for n, k in zip(r.assigned, r.kept, strict=True))
    assert r.dropped == sum(max(0, n - 32) for n in r.assigned) > 0
    assert counted == experts.moe_flops(128, 32, 16, 8, computed=256 - r.dropped)


def test_a_dropped_assignment_leaves_the_tokens_other_experts_and_keeps_the_first_comers():
    torch.manual_seed(3)
    full = experts.MoE(8, 8, 4, top_k=1)
    capped = experts.MoE(8, 8, 4, top_k=1, capacity_factor=0.5)
    capped.load_state_dict(full.state_dict())
    x = torch.randn(16, 8)
    with torch.no_grad():
        a, b = full(x), capped(x)
        chosen = full.route(x)[0][:, 0]
    cap = capped.last_routing.capacity
    for e in range(4):
        mine = (chosen == e).nonzero()[:, 0]
        torch.testing.assert_close(b[mine[:cap]], a[mine[:cap]])  # the first `cap` of each expert are computed
        assert (b[mine[cap:]] == 0).all()  # the rest get nothing from their only expert


def test_uniform_routing_formulas_match_many_random_batches():
    torch.manual_seed(4)
    layer = experts.MoE(64, 8, 16, top_k=2)
    with torch.no_grad():
        for batch in (1, 4, 16):
            seen = [(layer(torch.randn(batch, 64)), layer.last_routing.experts_used)[1] for _ in range(400)]
            se = np.std(seen) / math.sqrt(len(seen)) + 1e-9
            assert abs(np.mean(seen) - experts.expected_distinct_experts(batch, 16, 2)) < 4 * se + 0.02
        layer.capacity_factor = 1.0
        drops = [(layer(torch.randn(128, 64)), layer.last_routing.dropped)[1] for _ in range(300)]
    expected = experts.expected_dropped(128, 16, 2, 1.0)
    assert abs(np.mean(drops) - expected) < 4 * np.std(drops) / math.sqrt(len(drops))


def test_the_numbers_of_exercise_4s_folded_solution_in_both_profiles():
    """The solution states E·(1 − (1 − k/E)^8) and its ratio to k for the quick and the full profile's layer."""
    for profile, (touched, ratio) in {"quick": (10.5, 5.25), "full": (12.9, 6.45)}.items():
        m = SIZES["mixture_of_experts"][profile].model
        expected = experts.expected_distinct_experts(8, m["experts"], m["top_k"])
        assert (round(expected, 1), round(expected / m["top_k"], 2)) == (touched, ratio), profile


def test_expected_values_at_their_limits():
    assert experts.expected_distinct_experts(1, 8, 2) == pytest.approx(2)
    assert experts.expected_distinct_experts(1000, 8, 2) == pytest.approx(8)
    assert experts.expected_dropped(64, 8, 2, 64 / 16) == 0  # a capacity of every token drops nothing
    assert experts.expected_dropped(10, 4, 4, 1.0) == 0  # k = E: each expert gets exactly T, its capacity


@pytest.mark.parametrize(("tokens", "n_experts", "factor"), [(128, 16, 1.0), (256, 16, 1.25), (2048, 64, 1.0)])
def test_expected_drops_equal_the_exact_binomial_sum_at_any_size(tokens, n_experts, factor):
    """The notebook's full profile routes 2,048 tokens: C(2048, n) overflows a float, the log-space sum must not."""
    from fractions import Fraction

    capacity = experts.expert_capacity(tokens, n_experts, 2, factor)
    p = Fraction(2, n_experts)
    exact = n_experts * sum(
        (n - capacity) * math.comb(tokens, n) * p**n * (1 - p) ** (tokens - n) for n in range(capacity + 1, tokens + 1)
    )
    assert experts.expected_dropped(tokens, n_experts, 2, factor) == pytest.approx(float(exact), rel=1e-9)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: experts.MoE(8, 8, 4, top_k=5), "top_k"),
        (lambda: experts.MoE(8, 8, 0), "experts"),
        (lambda: experts.MoE(8, 8, 4, capacity_factor=0), "capacity_factor"),
        (lambda: experts.MoE(8, 8, 4)(torch.zeros(3, 7)), r"\(tokens, 8\)"),
        (lambda: experts.expert_capacity(10, 4, 2, float("nan")), "capacity_factor"),
        (lambda: experts.moe_flops(1, 8, 8, 4, computed=-1), "computed"),
        (lambda: experts.expected_distinct_experts(0, 8, 2), "batch"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.processes
def test_expert_parallel_on_two_ranks_equals_the_whole_layer_and_counts_its_bytes():
    ranks = distributed.launch(
        expert_parallel.expert_parallel_check, 2, width=32, hidden=48, experts=4, top_k=2, tokens=200, timeout_s=60
    )
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["backend"] == "gloo" for r in ranks)
    for r, other in zip(ranks, ranks[::-1], strict=True):
        assert r["max_error"] < 1e-5
        assert r["dispatch_bytes_received"] == other["sent_remote"] * 32 * 4
        assert r["combine_bytes_received"] == r["sent_remote"] * 32 * 4
        # the routing metadata, apart from the rows: an int64 expert id per row, and 2 ranks' counts 3 times
        assert r["ids_bytes_received"] == other["sent_remote"] * 8
        assert r["counts_bytes_received"] == 3 * 1 * 8
        assert 0 < r["sent_remote"] < r["assignments"] == 400
    with pytest.raises(distributed.DistributedRunError, match="divide evenly"):
        distributed.launch(expert_parallel.expert_parallel_check, 2, width=8, hidden=8, experts=3, top_k=1, tokens=4)
