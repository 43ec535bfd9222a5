"""Verdicts of A against B, matched by what they are about, never by address or time: ordering
pairs by (producer range, consumer range, kernels), hazards by (kind, NVTX paths, kernel names,
memory role = the allocation's label), sanitizer findings by (workload, tool, kind, kernel, source),
campaign cells by label (rates with Clopper-Pearson intervals, a two-sided Fisher test).

Step numbers in range names are pooled (tracer.compare.timing.range_key): the same race in step 3 of
A and step 7 of B is one unchanged hazard. What a side could not judge (no memory access sets, a
sanitizer run that did not finish, hazards beyond the listed ones) is said, and gates fail on it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from tracer.campaign.stats import CellStats
from tracer.compare.timing import range_key
from tracer.sanitize.model import Finding, SanVerdict, ToolRun
from tracer.analysis.analyze import PairVerdict
from tracer.analysis.hazards import Hazard, Hazards
from tracer.analysis.ordering import Verdict

ALPHA = 0.05


class Status(str, Enum):
    NEW = "new"  # only in B
    GONE = "gone"  # only in A (fixed)
    CHANGED = "changed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, kw_only=True)
class KeyedCount:
    """One matched key: how many instances A and B have, and what became of it."""

    key: tuple[str, ...]
    a: int
    b: int
    status: Status
    detail_a: str = ""  # pairs: the worst verdict; findings: the first message
    detail_b: str = ""

    def to_json(self, names: Sequence[str]) -> dict[str, object]:
        return {**dict(zip(names, self.key)), "a": self.a, "b": self.b, "status": self.status.value,
                "detail_a": self.detail_a, "detail_b": self.detail_b}


def _status(a: int, b: int, da: str, db: str) -> Status:
    if a == 0:
        return Status.NEW
    if b == 0:
        return Status.GONE
    return Status.CHANGED if da != db else Status.UNCHANGED


def match(a: Counter[tuple[str, ...]], b: Counter[tuple[str, ...]], da: dict[tuple[str, ...], str] | None = None,
          db: dict[tuple[str, ...], str] | None = None) -> tuple[KeyedCount, ...]:
    """Every key of A or B; new and gone first, then changed, then unchanged."""
    da, db = da or {}, db or {}
    rows = [KeyedCount(key=k, a=a.get(k, 0), b=b.get(k, 0), detail_a=da.get(k, ""), detail_b=db.get(k, ""),
                       status=_status(a.get(k, 0), b.get(k, 0), da.get(k, ""), db.get(k, "")))
            for k in set(a) | set(b)]
    rank = {Status.NEW: 0, Status.GONE: 1, Status.CHANGED: 2, Status.UNCHANGED: 3}
    return tuple(sorted(rows, key=lambda r: (rank[r.status], r.key)))


# ---- ordering pairs ---------------------------------------------------------------------------

PAIR_KEY = ("producer", "consumer", "producer_kernel", "consumer_kernel")


def pair_keys(pairs: Iterable[PairVerdict]) -> tuple[Counter[tuple[str, ...]], dict[tuple[str, ...], str]]:
    """Instances per key and the worst verdict of each key."""
    count: Counter[tuple[str, ...]] = Counter()
    worst: dict[tuple[str, ...], Verdict] = {}
    for p in pairs:
        k = (range_key(p.producer), range_key(p.consumer), p.producer_kernel, p.consumer_kernel)
        count[k] += 1
        if k not in worst or p.verdict.severity > worst[k].severity:
            worst[k] = p.verdict
    return count, {k: v.value for k, v in worst.items()}


def compare_pairs(a: Iterable[PairVerdict], b: Iterable[PairVerdict]) -> tuple[KeyedCount, ...]:
    (ca, wa), (cb, wb) = pair_keys(a), pair_keys(b)
    return match(ca, cb, wa, wb)


# ---- hazards ----------------------------------------------------------------------------------

HAZARD_KEY = ("kind", "producer", "producer_kernel", "consumer", "consumer_kernel", "memory_role")


def hazard_key(h: Hazard) -> tuple[str, ...]:
    label = (h.allocation.label if h.allocation is not None else None) or "?"
    role = label.split(" at ", 1)[0]  # "aten::ones out 0 at file.py:84": the source line may move between A and B
    return (h.kind.value + (" (may)" if h.may else ""), range_key(h.producer.range), h.producer.kernel,
            range_key(h.consumer.range), h.consumer.kernel, role)


@dataclass(frozen=True, kw_only=True)
class HazardDiff:
    checked: bool  # both sides have memory access sets and hazards were judged
    found_a: int
    found_b: int
    complete: bool  # every hazard of both sides was listed, so the matching saw them all
    rows: tuple[KeyedCount, ...]
    notes: tuple[str, ...] = ()

    @property
    def new(self) -> tuple[KeyedCount, ...]:
        return tuple(r for r in self.rows if r.status is Status.NEW or (r.b > r.a))

    def to_json(self) -> dict[str, object]:
        return {"checked": self.checked, "found_a": self.found_a, "found_b": self.found_b, "complete": self.complete,
                "new": sum(r.status is Status.NEW for r in self.rows), "gone": sum(r.status is Status.GONE for r in self.rows),
                "rows": [r.to_json(HAZARD_KEY) for r in self.rows], "notes": list(self.notes)}

    def failures(self) -> list[str]:
        """--fail-on-new-hazard: new hazard keys, more instances of a key, or hazards that B could not judge."""
        if not self.checked:
            return ["hazards were not judged on both sides (no memory access sets): new hazards unknown"]
        out = [f"new hazard: {r.key[0]} {r.key[1]} [{r.key[2]}] -> {r.key[3]} [{r.key[4]}] on {r.key[5]} "
               f"({r.a} -> {r.b})" for r in self.new]
        if not self.complete and self.found_b > self.found_a:
            out.append(f"B has {self.found_b} hazards against A's {self.found_a}, more than were listed to match")
        return out


def compare_hazards(a: Hazards | None, b: Hazards | None) -> HazardDiff:
    checked = a is not None and b is not None and a.memory and b.memory
    if not checked:
        side = [n for n, h in (("A", a), ("B", b)) if h is None or not h.memory]
        return HazardDiff(checked=False, found_a=a.found if a and a.memory else 0, found_b=b.found if b and b.memory else 0,
                          complete=False, rows=(), notes=(f"hazards not judged on {' and '.join(side)}: no memory access "
                                                          "sets (capture with `trace run --memory`)",))
    assert a is not None and b is not None
    complete = len(a.listed) == a.found and len(b.listed) == b.found
    rows = match(Counter(hazard_key(h) for h in a.listed), Counter(hazard_key(h) for h in b.listed))
    notes = () if complete else (f"only the listed hazards were matched ({len(a.listed)} of {a.found} in A, "
                                 f"{len(b.listed)} of {b.found} in B)",)
    unjudged = [f"{n}: {h.unjudged} kernel(s) without a memory access set on multi-stream devices"
                for n, h in (("A", a), ("B", b)) if h.unjudged]
    return HazardDiff(checked=True, found_a=a.found, found_b=b.found, complete=complete and not unjudged, rows=rows,
                      notes=notes + tuple(unjudged))


# ---- sanitizer findings -----------------------------------------------------------------------

FINDING_KEY = ("workload", "tool", "kind", "kernel", "source")
JUDGED = (SanVerdict.CLEAN, SanVerdict.ERRORS)


@dataclass(frozen=True, kw_only=True)
class FindingDiff:
    rows: tuple[KeyedCount, ...]
    unjudged: tuple[str, ...]  # (workload, tool) runs of either side whose verdict proves nothing either way
    only_a: tuple[str, ...]  # runs (workload/tool) only in A
    only_b: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"new": sum(r.status is Status.NEW for r in self.rows), "fixed": sum(r.status is Status.GONE for r in self.rows),
                "unchanged": sum(r.status is not Status.NEW and r.status is not Status.GONE for r in self.rows),
                "rows": [r.to_json(FINDING_KEY) for r in self.rows], "unjudged_runs": list(self.unjudged),
                "runs_only_in_a": list(self.only_a), "runs_only_in_b": list(self.only_b)}

    def failures(self) -> list[str]:
        out = [f"new finding: {r.key[1]} {r.key[2]} in {r.key[3]} ({r.key[4] or 'no source'}) of {r.key[0]}"
               for r in self.rows if r.status is Status.NEW]
        out += [f"run not judged: {u}" for u in self.unjudged]
        out += [f"run only in B: {u}" for u in self.only_b]
        return out


def _findings(runs: Sequence[ToolRun]) -> tuple[Counter[tuple[str, ...]], dict[tuple[str, ...], str], set[str], list[str]]:
    count: Counter[tuple[str, ...]] = Counter()
    first: dict[tuple[str, ...], str] = {}
    for r in runs:
        for f in r.findings:
            k = _finding_key(r, f)
            count[k] += f.count
            first.setdefault(k, f.message[:200])
    names = {f"{r.workload}/{r.tool.value}" for r in runs}
    unjudged = [f"{r.workload}/{r.tool.value}: {r.verdict.value}" for r in runs if r.verdict not in JUDGED]
    return count, first, names, unjudged


def _finding_key(r: ToolRun, f: Finding) -> tuple[str, ...]:
    return (r.workload, r.tool.value, f.kind, f.kernel, f.source)


def compare_findings(a: Sequence[ToolRun], b: Sequence[ToolRun]) -> FindingDiff:
    ca, fa, na, ua = _findings(a)
    cb, fb, nb, ub = _findings(b)
    rows = match(ca, cb)
    return FindingDiff(rows=tuple(_with_messages(r, fa, fb) for r in rows), unjudged=tuple(f"A {u}" for u in ua) +
                       tuple(f"B {u}" for u in ub), only_a=tuple(sorted(na - nb)), only_b=tuple(sorted(nb - na)))


def _with_messages(r: KeyedCount, fa: dict[tuple[str, ...], str], fb: dict[tuple[str, ...], str]) -> KeyedCount:
    status = Status.UNCHANGED if r.status is Status.CHANGED else r.status  # a count change is not a new finding
    return KeyedCount(key=r.key, a=r.a, b=r.b, status=status, detail_a=fa.get(r.key, ""), detail_b=fb.get(r.key, ""))


# ---- campaign cells ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class CellDiff:
    label: str
    a: CellStats | None
    b: CellStats | None
    p_value: float | None  # two-sided Fisher exact test of the two rates
    status: Status  # CHANGED: p < alpha

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "a": self.a.to_json() if self.a else None, "b": self.b.to_json() if self.b else None,
                "p_value": self.p_value, "status": self.status.value}


def compare_cells(a: Sequence[CellStats], b: Sequence[CellStats], alpha: float = ALPHA) -> tuple[CellDiff, ...]:
    from scipy import stats

    ia, ib = {c.label: c for c in a}, {c.label: c for c in b}
    out = []
    for label in sorted(set(ia) | set(ib)):
        x, y = ia.get(label), ib.get(label)
        if x is None or y is None:
            out.append(CellDiff(label=label, a=x, b=y, p_value=None, status=Status.NEW if x is None else Status.GONE))
            continue
        p = float(stats.fisher_exact([[x.failures, x.trials - x.failures], [y.failures, y.trials - y.failures]]).pvalue)
        out.append(CellDiff(label=label, a=x, b=y, p_value=p, status=Status.CHANGED if p < alpha else Status.UNCHANGED))
    return tuple(out)
