import inspect

import pytest
from torch.distributed.pipelining import Schedule1F1B

from labkit.predict import pipeline


@pytest.mark.parametrize(("stages", "microbatches"), [(2, 2), (2, 8), (4, 4), (4, 12), (8, 3)])
def test_every_stage_runs_each_micro_batch_forward_then_backward(stages, microbatches):
    for stage in range(stages):
        for order in (pipeline.gpipe(stage, stages, microbatches), pipeline.one_f_one_b(stage, stages, microbatches)):
            assert sorted(order) == sorted(
                [f"F{i}" for i in range(microbatches)] + [f"B{i}" for i in range(microbatches)]
            )
            assert all(order.index(f"F{i}") < order.index(f"B{i}") for i in range(microbatches))
        assert pipeline.most_in_flight(pipeline.gpipe(stage, stages, microbatches)) == microbatches
        assert pipeline.most_in_flight(pipeline.one_f_one_b(stage, stages, microbatches)) == min(
            microbatches, stages - stage
        )


def test_the_order_of_a_two_stage_pipeline_by_hand():
    assert pipeline.one_f_one_b(0, 2, 4) == ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"]
    assert pipeline.one_f_one_b(1, 2, 4) == ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]


def test_torchs_1f1b_still_warms_up_as_modelled():
    """A canary: one_f_one_b models Schedule1F1B's warm-up; if PyTorch changes the rule, this says so."""
    source = inspect.getsource(Schedule1F1B._step_microbatches)
    assert "self._num_stages - self._stage.stage_index" in source and "warmup_chunks = min(" in source


def test_bad_stages_are_refused():
    with pytest.raises(ValueError, match="stage must be a whole number from 0 to stages - 1 = 1"):
        pipeline.one_f_one_b(2, 2, 4)
    with pytest.raises(ValueError, match="microbatches"):
        pipeline.gpipe(0, 2, 0)
