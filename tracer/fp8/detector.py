"""Corruption detector: per-step comparisons computed on the device, read back once per step.

Each comparison is a `Measure`: one value computed on the device (mismatching codes, largest
difference, relative error, norm ratio) and the rule that judges it on the host after the read-back,
so a comparison costs the kernels that compute its value and nothing more. Judged, it becomes
(failed, value) for a check at a position (step, layer, microbatch); the verdict per check is
pass/fail, the worst value and the first failing position.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


class Check(str, Enum):
    FP8_ROWWISE = "fp8_rowwise"
    FP8_COLUMNWISE = "fp8_columnwise"
    AMAX = "amax"
    SCALE_INV = "scale_inv"
    DGRAD = "dgrad"
    WGRAD = "wgrad"
    GRAD_NORM = "grad_norm"
    UPDATE_COUNT = "update_count"


@dataclass(frozen=True, order=True)
class Where:
    step: int
    layer: int
    microbatch: int

    def __str__(self) -> str:
        return f"step{self.step}/layer{self.layer}/mb{self.microbatch}"


@dataclass(frozen=True, kw_only=True)
class CheckVerdict:
    check: Check
    passed: bool
    worst: float
    comparisons: int
    failures: int
    first_failure: Where | None

    def to_json(self) -> dict[str, object]:
        return {
            "check": self.check.value, "passed": self.passed, "worst": self.worst,
            "comparisons": self.comparisons, "failures": self.failures,
            "first_failure": str(self.first_failure) if self.first_failure else None,
        }


class Rule(str, Enum):
    NONZERO = "nonzero"  # failed unless the value is 0
    ABOVE = "above"  # failed if the value exceeds the limit
    OUTSIDE = "outside"  # failed if the value is above the limit or below its inverse


@dataclass(frozen=True)
class Measure:
    value: torch.Tensor  # one float32 element on the comparison's device
    rule: Rule
    limit: float = 0.0

    def judge(self, value: float) -> tuple[bool, float]:
        """(failed, value); a non-finite value always fails and is reported as inf."""
        if not math.isfinite(value):
            return True, math.inf
        if self.rule is Rule.NONZERO:
            return value != 0, value
        if self.rule is Rule.ABOVE:
            return value > self.limit, value
        return value > self.limit or value < 1.0 / self.limit, value


def codes_mismatch(out: torch.Tensor, ref: torch.Tensor) -> Measure:
    """Mismatching elements of FP8 outputs compared as raw bytes."""
    import torch

    return Measure((out.view(torch.uint8) != ref.view(torch.uint8)).sum().float(), Rule.NONZERO)


def exact_diff(out: torch.Tensor, ref: torch.Tensor) -> Measure:
    return Measure((out.float() - ref.float()).abs().max(), Rule.NONZERO)


def relative_error(out: torch.Tensor, ref: torch.Tensor, tol: float) -> Measure:
    """||out-ref||/||ref||; non-finite output always fails."""
    import torch

    o, r = out.float(), ref.float()
    return Measure(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r).clamp_min(1e-30), Rule.ABOVE, tol)


def norm_ratio(out: torch.Tensor, ref: torch.Tensor, max_ratio: float) -> Measure:
    """||out||/||ref||: the motivating symptom is a finite but huge gradient."""
    import torch

    ratio = torch.linalg.vector_norm(out.float()) / torch.linalg.vector_norm(ref.float()).clamp_min(1e-30)
    return Measure(ratio, Rule.OUTSIDE, max_ratio)


@dataclass
class Detector:
    """Collects device-side measures during a step; `flush` reads them back in one transfer."""

    pending: list[tuple[Check, Where, Measure]] = field(default_factory=list)
    results: list[tuple[Check, Where, bool, float]] = field(default_factory=list)

    def add(self, check: Check, where: Where, measure: Measure) -> None:
        self.pending.append((check, where, measure))

    def flush(self) -> None:
        if not self.pending:
            return
        import torch

        values = torch.stack([m.value.reshape(()) for _, _, m in self.pending]).cpu().tolist()
        for (check, where, m), value in zip(self.pending, values):
            self.results.append((check, where, *m.judge(value)))
        self.pending.clear()


def _worst(check: Check, values: list[float]) -> float:
    if check is Check.GRAD_NORM:  # furthest from 1 in either direction
        return max(values, key=lambda v: max(v, 1.0 / v) if v > 0 else float("inf"))
    return max(values)


def summarize(results: list[tuple[Check, Where, bool, float]]) -> list[CheckVerdict]:
    out = []
    for check in Check:
        rows = [r for r in results if r[0] is check]
        if not rows:
            continue
        failing = sorted(w for _, w, failed, _ in rows if failed)
        out.append(CheckVerdict(check=check, passed=not failing, worst=_worst(check, [v for *_, v in rows]), comparisons=len(rows),
                                failures=len(failing),
                                first_failure=failing[0] if failing else None))
    return out
