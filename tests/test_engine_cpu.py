"""The workload engine end to end on the CPU (torch_composite launches no tracer kernel)."""
from __future__ import annotations

import pytest
import torch

from tracer.fp8.detector import Check
from tracer.workloads.engine import Engine
from tracer.workloads.runner import format_report, run_workload
from tracer.workloads.spec import load_workload


def small(**kw: object):
    base = dict(tokens=64, hidden=32, steps=3, layers=3, microbatches=2)
    base.update(kw)
    return load_workload("torch_composite").with_overrides(**base)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_clean_run_and_exactly_one_update_per_step(checkpointing: bool) -> None:
    report = run_workload(small(checkpointing=checkpointing), "cpu")
    assert report.passed, format_report(report)
    assert set(report.update_counts.values()) == {3} and len(report.update_counts) == 9
    # amax contributions: one per microbatch per step; recompute casts do not count twice
    assert report.amax_contributions["layer0.input"] == 3 * 2
    assert report.amax_contributions["layer0.grad_output"] == 3 * 2
    checks = {v.check for v in report.verdicts}
    assert {Check.FP8_ROWWISE, Check.AMAX, Check.DGRAD, Check.WGRAD, Check.GRAD_NORM, Check.UPDATE_COUNT} <= checks


def test_corrupted_dgrad_is_found_at_its_step_layer_and_microbatch(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = Engine.gemm

    def corrupting(a, a_rowwise, b, b_rowwise):
        out = real(a, a_rowwise, b, b_rowwise)
        calls["n"] += 1
        # per microbatch: 3 fprop, then (dgrad, wgrad) per layer from the last; 2 microbatches a step
        if calls["n"] == 18 + 3 + 1:  # step 1, microbatch 0, first dgrad = layer 2
            out = out.clone()
            out[0, 0] = 1.0e4  # finite but huge
        return out

    monkeypatch.setattr(Engine, "gemm", staticmethod(corrupting))
    report = run_workload(small(), "cpu")
    by = {v.check: v for v in report.verdicts}
    assert not report.passed and report.failed_steps == (1,)
    assert not by[Check.DGRAD].passed and str(by[Check.DGRAD].first_failure) == "step1/layer2/mb0"
    assert not by[Check.GRAD_NORM].passed and by[Check.GRAD_NORM].worst > 4.0
    assert by[Check.FP8_ROWWISE].passed


def test_bit_flip_in_cast_output_fails_fp8_check(monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.Tensor.contiguous

    def flip(self: torch.Tensor, *a: object, **k: object) -> torch.Tensor:
        out = real(self, *a, **k)
        if out.dtype == torch.float8_e5m2:  # the grad-output columnwise copy
            raw = out.view(torch.uint8).clone()
            raw[1, 2] ^= 0x04
            return raw.view(torch.float8_e5m2)
        return out

    monkeypatch.setattr(torch.Tensor, "contiguous", flip)
    report = run_workload(small(steps=1, layers=1, microbatches=1), "cpu")
    by = {v.check: v for v in report.verdicts}
    assert not by[Check.FP8_COLUMNWISE].passed and by[Check.FP8_COLUMNWISE].worst == 1.0
    assert by[Check.FP8_ROWWISE].passed


def test_gpu_only_workloads_refuse_cpu() -> None:
    from tracer.errors import UsageError

    with pytest.raises(UsageError, match="--device cpu runs only torch_composite"):
        run_workload(load_workload("linear_backward"), "cpu")


def test_sampled_blocks_are_the_same_rows_of_both_operands() -> None:
    from tracer.workloads.engine import Sample

    t = torch.arange(6 * 8).reshape(6, 8)
    assert Engine.take(t, Sample(torch.tensor([1]), 2), 0).tolist() == t[2:4].tolist()
    assert Engine.take(t, Sample(torch.tensor([3]), 2), 1).tolist() == t[:, 6:8].tolist()
    assert Engine.take(t, Sample(torch.tensor([1]), 3), 1).tolist() == t[:, 3:6].tolist()  # 8 % 3: index path
    assert Engine.take(t, None, 1) is t


def test_sampled_checks_draw_a_new_block_each_time_and_pass_when_clean() -> None:
    engine = Engine(small(steps=1, layers=1, microbatches=1, tokens=256), torch.device("cpu"), sample=0.0625)
    blocks = {int(engine.rows(256).block) for _ in range(40)}
    assert len(blocks) > 8 and max(blocks) < 16
    engine.step(0)
    assert engine.detector.results and all(not failed for *_, failed, _ in engine.detector.results)


def test_every_workload_kind_has_its_traits() -> None:
    """The engine reads what a kind does from one table: a new Kind without a row fails here, not on a GPU."""
    from tracer.workloads.engine import TRAITS
    from tracer.workloads.spec import Kind

    assert set(TRAITS) == set(Kind)
    assert [k for k, t in TRAITS.items() if t.torch_cast] == [Kind.TORCH_COMPOSITE]
    assert {k for k, t in TRAITS.items() if t.side_stream} == {Kind.PLANTED_CROSS_STREAM, Kind.EVENT_ORDERED_DGRAD}
