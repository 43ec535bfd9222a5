"""The result of `tracer diff`: two runs of one kind compared (tracer.app.diff makes it from
paths or opened artifacts; the text, HTML and picture views draw it). Its JSON is the contract in
docs/diff.md."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tracer.compare.layout import StepLayout
from tracer.compare.timing import ALPHA, Change, TimeChange
from tracer.compare.verdicts import PAIR_KEY, CellDiff, FindingDiff, HazardDiff, KeyedCount, Status
from tracer.errors import UsageError
from tracer.schemas import header, version

SCHEMA = version("diff")  # 2: `kind` is "diff"; what was compared moved to `compared`


class DiffKind(str, Enum):
    TRACE = "trace"
    JOB = "job"
    SANITIZE = "sanitize"
    CAMPAIGN = "campaign"
    PROFILE = "profile"


WORDS = {DiffKind.TRACE: "a trace", DiffKind.JOB: "a multi-process job", DiffKind.SANITIZE: "a sanitizer report",
         DiffKind.CAMPAIGN: "a campaign store or ablation JSON", DiffKind.PROFILE: "an Nsight Compute profile run"}


@dataclass(frozen=True, kw_only=True)
class Side:
    path: str
    complete: bool  # False: a partial job (a process without a complete trace), lost records
    size: int  # kernels (trace, job), tool runs (sanitize), cells (campaign), launches (profile)
    steps: int  # step instances found (0: no step ranges)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__, notes=list(self.notes))


@dataclass(frozen=True, kw_only=True)
class Diff:
    kind: DiffKind
    a: Side
    b: Side
    same_input: bool
    matching: str  # how instances were matched (steps, processes)
    pairs: tuple[KeyedCount, ...] | None = None
    pair_counts: tuple[dict[str, int], dict[str, int]] | None = None
    hazards: HazardDiff | None = None
    findings: FindingDiff | None = None
    cells: tuple[CellDiff, ...] | None = None
    timing: tuple[TimeChange, ...] = ()
    alpha: float = ALPHA
    notes: tuple[str, ...] = field(default=())
    layouts: tuple[StepLayout, StepLayout] | None = None  # one representative step per side, for the picture; not in the JSON

    @property
    def changed_timing(self) -> tuple[TimeChange, ...]:
        return tuple(t for t in self.timing if t.change in (Change.SLOWER, Change.FASTER, Change.NEW, Change.GONE))

    @property
    def changed_pairs(self) -> tuple[KeyedCount, ...]:
        return tuple(p for p in self.pairs or () if p.status is not Status.UNCHANGED)

    @property
    def no_change(self) -> bool:
        """Nothing changed that the diff can show: no verdict moved, no time beyond noise, nothing new or
        gone; never claimed for an incomplete side unless both sides are the same input."""
        if not self.same_input and not (self.a.complete and self.b.complete):
            return False
        verdicts = [self.changed_pairs, [r for r in (self.hazards.rows if self.hazards else ()) if r.status is not Status.UNCHANGED],
                    [r for r in (self.findings.rows if self.findings else ()) if r.status is not Status.UNCHANGED],
                    [c for c in self.cells or () if c.status is not Status.UNCHANGED]]
        moved = [t for t in self.timing if t.change is Change.UNJUDGED and t.median_a_ns != t.median_b_ns]
        return not self.changed_timing and not moved and not any(verdicts)

    def to_json(self) -> dict[str, Any]:
        return {
            **header("diff"), "compared": self.kind.value, "a": self.a.to_json(), "b": self.b.to_json(),
            "same_input": self.same_input, "no_change": self.no_change, "matching": self.matching,
            "statistics": {"test": "Mann-Whitney U, two-sided, Holm-corrected", "interval": "bootstrap 95% of median B / median A",
                           "alpha": self.alpha},
            "pairs": None if self.pairs is None else {"counts_a": self.pair_counts[0] if self.pair_counts else {},
                                                       "counts_b": self.pair_counts[1] if self.pair_counts else {},
                                                       "rows": [p.to_json(PAIR_KEY) for p in self.pairs]},
            "hazards": self.hazards.to_json() if self.hazards else None,
            "findings": self.findings.to_json() if self.findings else None,
            "cells": None if self.cells is None else [c.to_json() for c in self.cells],
            "timing": [t.to_json() for t in self.timing], "notes": list(self.notes),
        }

    def failures(self, new_hazard: bool = False, new_finding: bool = False, regression_pct: float | None = None) -> list[str]:
        """Why the requested gates fail ([]: they pass). A side that is incomplete fails every gate."""
        out: list[str] = []
        if new_hazard:
            out += self._hazard_failures()
        if new_finding:
            out += self._finding_failures()
        if regression_pct is not None:
            out += [f"regression beyond noise: {t.kind.value} {t.name} {t.percent:+.1f}% (median {t.median_a_ns:.0f} -> "
                    f"{t.median_b_ns:.0f} ns, 95% CI x{t.ci_low:.3f}..x{t.ci_high:.3f}, p={t.p_holm:.2g})"
                    for t in self.timing if t.change is Change.SLOWER and (t.percent or 0.0) >= regression_pct]
        if new_hazard or new_finding or regression_pct is not None:
            out += [f"{n} is incomplete ({'; '.join(s.notes) or 'partial'}): the comparison cannot be trusted"
                    for n, s in (("A", self.a), ("B", self.b)) if not s.complete]
        return out

    def _hazard_failures(self) -> list[str]:
        if self.kind not in (DiffKind.TRACE, DiffKind.JOB):
            raise UsageError(f"--fail-on-new-hazard needs traces or jobs, not {WORDS[self.kind]}")
        return self.hazards.failures() if self.hazards else ["hazards were not judged (--no-hazards)"]

    def _finding_failures(self) -> list[str]:
        if self.findings is None:
            raise UsageError(f"--fail-on-new-finding needs sanitizer reports, not {WORDS[self.kind]}")
        return self.findings.failures()
