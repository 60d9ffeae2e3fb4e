import pytest
import torch

from labkit.workloads import data, large_batch, models


def test_critical_batch_fit_recovers_the_model_exactly():
    batches = [4, 16, 64, 256, 1024]
    truth = large_batch.CriticalBatchFit(s_min=7.0, b_noise=90.0)
    fit = large_batch.fit_critical_batch(batches, [truth.steps(b) for b in batches])
    assert fit.s_min == pytest.approx(7.0, rel=1e-9) and fit.b_noise == pytest.approx(90.0, rel=1e-9)
    assert truth.steps(90.0) == 14.0  # at B = B_noise, twice S_min (McCandlish et al., 2018, eq. 2.11)
    assert str(fit) == "S = 7.0 x (1 + 90 / B)"
    with pytest.raises(ValueError, match="at least 3"):
        large_batch.fit_critical_batch([4, 16], [10, 5])
    with pytest.raises(ValueError, match="positive numbers"):
        large_batch.fit_critical_batch([4, 16, 64], [10, None, 5])
    with pytest.raises(ValueError, match="no positive S_min"):
        large_batch.fit_critical_batch([1, 2, 4], [100, 40, 1])


def _task():
    x, y = data.teacher_classification(1024 + 256, 8, 2, seed=1).tensors
    return (x[:1024], y[:1024]), (x[1024:], y[1024:])


def test_steps_to_target_counts_steps_is_seeded_and_reports_failure():
    train, test = _task()

    def make():
        return models.MLP(8, 16, 1, 2)

    kw = dict(batch=64, lr=1.0, target=0.7, max_steps=200)
    first = large_batch.steps_to_target(make, train, test, **kw)
    assert first is not None and first == large_batch.steps_to_target(make, train, test, **kw)
    assert large_batch.steps_to_target(make, train, test, **dict(kw, target=1.0, max_steps=3)) is None
    assert large_batch.steps_to_target(make, train, test, **dict(kw, lr=1e30)) is None  # the loss blows up
    results = {r: large_batch.steps_to_target(make, train, test, **dict(kw, lr=r)) for r in (0.01, 1.0, 1e30)}
    reached = {r: s for r, s in results.items() if s is not None}
    best = min(reached, key=reached.get)
    assert large_batch.fewest_steps(make, train, test, batch=64, lrs=[0.01, 1.0, 1e30], target=0.7, max_steps=200) == (
        reached[best],
        best,
    )
    with pytest.raises(ValueError, match="0 < target <= 1"):
        large_batch.steps_to_target(make, train, test, **dict(kw, target=80))


def test_warmup_ramps_the_rate_linearly(monkeypatch):
    seen = []
    original = torch.optim.SGD.step

    def spy(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.SGD, "step", spy)
    train, test = _task()
    large_batch.steps_to_target(
        lambda: models.MLP(8, 16, 1, 2), train, test, batch=8, lr=2.0, target=1.0, max_steps=6, warmup_steps=4
    )
    assert seen == [0.5, 1.0, 1.5, 2.0, 2.0, 2.0]  # Goyal et al., 2017: lr · step / warm-up steps, then lr
