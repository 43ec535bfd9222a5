"""Corruption detector: per-step comparisons computed on the device, read back once per step.

Each comparison yields (failed, error) for a check at a position (step, layer, microbatch); the
verdict per check is pass/fail, the worst error and the first failing position.
"""
from __future__ import annotations

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


@dataclass(frozen=True)
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


def codes_mismatch(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """(failed, mismatching elements) for FP8 outputs compared as raw bytes."""
    import torch

    bad = (out.view(torch.uint8) != ref.view(torch.uint8)).sum().float()
    return torch.stack([(bad > 0).float(), bad])


def exact_diff(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    import torch

    d = (out.float() - ref.float()).abs().max()
    d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
    return torch.stack([(d != 0).float(), d])


def relative_error(out: torch.Tensor, ref: torch.Tensor, tol: float) -> torch.Tensor:
    """(failed, ||out-ref||/||ref||); non-finite output always fails."""
    import torch

    o, r = out.float(), ref.float()
    err = torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r).clamp_min(1e-30)
    err = torch.where(torch.isfinite(err), err, torch.full_like(err, float("inf")))
    return torch.stack([(err > tol).float(), err])


def norm_ratio(out: torch.Tensor, ref: torch.Tensor, max_ratio: float) -> torch.Tensor:
    """(failed, ||out||/||ref||): the motivating symptom is a finite but huge gradient."""
    import torch

    ratio = torch.linalg.vector_norm(out.float()) / torch.linalg.vector_norm(ref.float()).clamp_min(1e-30)
    ratio = torch.where(torch.isfinite(ratio), ratio, torch.full_like(ratio, float("inf")))
    bad = (ratio > max_ratio) | (ratio < 1.0 / max_ratio)
    return torch.stack([bad.float(), ratio])


@dataclass
class Detector:
    """Collects device-side results during a step; `flush` reads them back in one transfer."""

    pending: list[tuple[Check, Where, torch.Tensor]] = field(default_factory=list)
    results: list[tuple[Check, Where, bool, float]] = field(default_factory=list)

    def add(self, check: Check, where: Where, pair: torch.Tensor) -> None:
        self.pending.append((check, where, pair))

    def flush(self) -> None:
        if not self.pending:
            return
        import torch

        values = torch.stack([p for _, _, p in self.pending]).cpu().tolist()
        for (check, where, _), (failed, value) in zip(self.pending, values):
            self.results.append((check, where, bool(failed), float(value)))
        self.pending.clear()

    def verdicts(self) -> list[CheckVerdict]:
        self.flush()
        return summarize(self.results)


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
        out.append(CheckVerdict(check, not failing, _worst(check, [v for *_, v in rows]), len(rows), len(failing),
                                failing[0] if failing else None))
    return out
