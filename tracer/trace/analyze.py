"""Stream statistics, producer -> consumer ordering verdicts and memory hazards: the JSON contract of
`tracer trace analyze`."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from tracer.errors import UsageError
from tracer.trace.attribution import Attribution, attribute
from tracer.trace.hazards import Hazards, find_hazards
from tracer.trace.model import Trace
from tracer.trace.ordering import VERDICTS, Edge, OrderingIndex, Verdict, stream_keys
from tracer.trace.pairs import GlobPair, PairMode, PairSpec
from tracer.trace.selection import require_matches

MAX_LISTED_PAIRS = 200
UNORDERED = VERDICTS.index(Verdict.UNORDERED)
PAIRS_ALL_NOTE = ("--pairs all without memory access sets cannot tell races from independent work: "
                  "an UNORDERED pair may touch different memory (capture with --memory for hazards)")
PAIRS_BY_MEMORY_NOTE = ("pairs not judged by default: the trace has memory access sets, so hazards say which kernels "
                        "race on the same memory (--pairs all still lists the ordering of every pair)")


@dataclass(frozen=True, kw_only=True)
class StreamStats:
    device: int
    stream: int
    kernels: int
    busy_ns: int
    idle_ns: int
    span_ns: int
    max_gap_ns: int

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True, kw_only=True)
class PairVerdict:
    producer: str
    consumer: str
    producer_stream: int
    consumer_stream: int
    verdict: Verdict
    edge: Edge | None
    gap_ns: int  # consumer start - producer end; negative: they overlapped on the GPU
    producer_kernel: str
    consumer_kernel: str
    producer_rule: str = "none"  # the attribution rule that named each kernel's range
    consumer_rule: str = "none"
    producer_index: int = -1  # the two kernels' indices in trace.kernels (-1: not known); not in the JSON
    consumer_index: int = -1

    def to_json(self) -> dict[str, object]:
        return {"producer": self.producer, "consumer": self.consumer, "producer_stream": self.producer_stream,
                "consumer_stream": self.consumer_stream, "verdict": self.verdict.value,
                "edge": self.edge.to_json() if self.edge else None, "gap_ns": self.gap_ns,
                "producer_kernel": self.producer_kernel, "consumer_kernel": self.consumer_kernel,
                "producer_rule": self.producer_rule, "consumer_rule": self.consumer_rule}


@dataclass(frozen=True, kw_only=True)
class Analysis:
    trace: Trace
    streams: tuple[StreamStats, ...]
    attribution: Attribution
    pairs: tuple[PairVerdict, ...]  # every glob pair; for `all`, the listed ones (UNORDERED first)
    pair_counts: dict[str, int]
    event_edges: int
    unmatched_waits: int
    pair_spec: PairSpec
    hazards: Hazards | None = None  # None: switched off (--no-hazards)
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        t = self.trace
        listed = [p for p in self.pairs if p.verdict is Verdict.UNORDERED][:MAX_LISTED_PAIRS]
        listed += [p for p in self.pairs if p.verdict is not Verdict.UNORDERED][: max(0, MAX_LISTED_PAIRS - len(listed))]
        return {
            "source": t.source, "producer": t.producer, "kernels": len(t.kernels),
            "streams": [s.to_json() for s in self.streams],
            "unattributed": self.attribution.unattributed, "no_launch_record": self.attribution.no_launch_record,
            "attribution_rules": self.attribution.rule_counts(),
            "nvtx_ranges": int(len(t.ranges.start)), "memcpy": t.memcpy_count, "memset": t.memset_count,
            "syncs": dict(Counter(y.kind.value for y in t.syncs)), "event_records": len(t.records),
            "event_edges": self.event_edges, "unmatched_waits": self.unmatched_waits,
            "record_errors": {kind: {"lost": n, "first_error": first} for kind, (n, first) in t.record_errors.items()},
            "pair_spec": self.pair_spec.to_json(), "pair_counts": self.pair_counts,
            "pairs_listed": len(listed), "pairs": [p.to_json() for p in listed],
            "hazards": self.hazards.to_json() if self.hazards else {"memory": bool(t.memory and t.memory.recorded),
                                                                    "checked": False},
            "warnings": list(self.warnings), "notes": list(self.notes),
        }

    @property
    def unordered(self) -> int:
        return self.pair_counts.get(Verdict.UNORDERED.value, 0)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Records the capture could not read: verdicts may miss what they held."""
        return tuple(f"{'unknown number of' if n < 0 else n} {kind} record(s) lost at capture ({first}): "
                     "verdicts cannot account for them" for kind, (n, first) in self.trace.record_errors.items())

    def failures(self, fail_on_unordered: bool, fail_on_hazard: bool) -> list[str]:
        """Why the requested checks fail (empty: they pass); lost records fail any check (fail closed)."""
        out = []
        if fail_on_unordered and self.unordered:
            out.append(f"{self.unordered} producer -> consumer pair(s) are UNORDERED")
        if fail_on_hazard:
            if self.hazards is None:
                raise UsageError("--fail-on-hazard needs the hazard check: drop --no-hazards")
            out += self.hazards.failures()
        if (fail_on_unordered or fail_on_hazard) and self.trace.record_errors:
            out.append(f"records were lost at capture ({', '.join(self.trace.record_errors)}): the trace is incomplete")
        return out

    def report_lines(self) -> list[str]:
        """What the text report says beyond streams and pairs: warnings, attribution rules, notes, hazards."""
        lines = [f"warning: {w}" for w in self.warnings]
        rules = self.attribution.rule_counts()
        if rules["forward-op"] or rules["backward-caller"]:
            lines.append("attribution: " + ", ".join(f"{k} {v}" for k, v in rules.items()))
        lines += [f"note: {n}" for n in self.notes]
        if self.hazards is not None:
            lines += self.hazards.text_lines()
        return lines


def stream_stats(trace: Trace) -> tuple[StreamStats, ...]:
    k = trace.kernels
    keys, inverse = stream_keys(k.device, k.stream)
    by_stream = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[by_stream], np.arange(len(keys) + 1))
    out = []
    for n, (dev, stream) in enumerate(keys):
        idx = by_stream[bounds[n]:bounds[n + 1]]
        start, end = k.start[idx], k.end[idx]
        order = np.argsort(start, kind="stable")
        start, end = start[order], np.maximum.accumulate(end[order])
        gaps = np.maximum(start[1:] - end[:-1], 0)
        span = int(end[-1] - start[0])
        idle = int(gaps.sum())
        out.append(StreamStats(device=dev, stream=stream, kernels=len(idx), busy_ns=span - idle, idle_ns=idle, span_ns=span,
                               max_gap_ns=int(gaps.max()) if len(gaps) else 0))
    return tuple(out)


def glob_regex(glob: str) -> re.Pattern[str]:
    """`*` captures any text (the captures pair a producer with its consumer), `?` one character."""
    parts = [("(.*)" if ch == "*" else "(.)" if ch == "?" else re.escape(ch)) for ch in glob]
    return re.compile("^" + "".join(parts) + "$")


@dataclass(frozen=True)
class Instances:
    """Ranges whose name matches a glob, with their kernels (CSR: kernels[offset[i]:offset[i+1]])."""

    ranges: np.ndarray
    keys: list[tuple[str, ...]]  # the glob's captures per range
    offset: np.ndarray
    kernels: np.ndarray


def _instances(trace: Trace, attr: Attribution, glob: str) -> Instances:
    """Matching ranges in order of their first kernel, each with its kernels in index order."""
    rx, rng = glob_regex(glob), attr.range_of_kernel
    kern = np.nonzero(rng >= 0)[0]
    text = trace.ranges.text[rng[kern]]
    groups: dict[int, tuple[str, ...]] = {}
    for sid in np.unique(text).tolist():
        m = rx.match(trace.strings[sid])
        if m:
            groups[sid] = m.groups()
    kern = kern[np.isin(text, np.fromiter(groups, dtype=np.int64, count=len(groups)))]
    r = rng[kern]
    by_range = np.lexsort((kern, r))
    kern, r = kern[by_range], r[by_range]
    new = np.r_[True, r[1:] != r[:-1]] if len(r) else np.zeros(0, dtype=bool)
    first_kernel = kern[new][np.cumsum(new) - 1]  # each kernel's range's first kernel
    order = np.lexsort((kern, first_kernel))
    kern, r, new = kern[order], r[order], np.r_[True, first_kernel[order][1:] != first_kernel[order][:-1]][:len(order)]
    ranges = r[new]
    offset = np.r_[np.flatnonzero(new), len(kern)].astype(np.int64)
    return Instances(ranges, [groups[int(trace.ranges.text[x])] for x in ranges.tolist()], offset, kern)


def _frontiers(index: OrderingIndex, inst: Instances, last: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per instance, per stream, the producer submitted last (last=True) or the consumer submitted
    first: if it is ordered, so are the others on its stream, by stream order. Streams in order of
    their first kernel in the instance (CSR like Instances)."""
    k, kern = index.trace.kernels, inst.kernels
    which = np.repeat(np.arange(len(inst.ranges)), np.diff(inst.offset))
    col, corr, pos = index.kernel_col[kern], k.corr[kern], np.arange(len(kern))
    # last: the highest correlation id, ties the first kernel; first: the lowest, ties the last kernel
    order = np.lexsort((pos, -corr, col, which)) if last else np.lexsort((-pos, corr, col, which))
    head = np.r_[True, (which[order][1:] != which[order][:-1]) | (col[order][1:] != col[order][:-1])] if len(order) else order
    chosen = order[head.astype(bool)]
    group_of = np.cumsum(head) - 1
    first_pos = np.full(int(head.sum()), len(kern), dtype=np.int64)
    np.minimum.at(first_pos, group_of, order)
    arrange = np.lexsort((first_pos, which[chosen]))
    chosen = chosen[arrange]
    offset = np.searchsorted(which[chosen], np.arange(len(inst.ranges) + 1))
    return offset, kern[chosen]


def glob_pairs(trace: Trace, attr: Attribution, index: OrderingIndex, producer: str, consumer: str) -> list[PairVerdict]:
    prods, cons = _instances(trace, attr, producer), _instances(trace, attr, consumer)
    if len(cons.ranges) == 0 or len(prods.ranges) == 0:
        return []
    p_off, p_front = _frontiers(index, prods, last=True)
    c_off, c_front = _frontiers(index, cons, last=False)
    match = _match_instances(trace, prods, cons)
    pi = np.array([p for _, p in match], dtype=np.int64)
    ci = np.array([c for c, _ in match], dtype=np.int64)
    if len(ci) == 0:
        return []
    np_, nc = p_off[pi + 1] - p_off[pi], c_off[ci + 1] - c_off[ci]
    pair_of = np.repeat(np.arange(len(ci)), np_ * nc)
    j = np.arange(len(pair_of)) - np.repeat(np.cumsum(np_ * nc) - np_ * nc, np_ * nc)
    p = p_front[p_off[pi][pair_of] + j // nc[pair_of]]
    c = c_front[c_off[ci][pair_of] + j % nc[pair_of]]
    codes = index.verdicts(p, c)
    worst = np.lexsort((np.arange(len(codes)), -codes.astype(np.int64), pair_of))
    head = worst[np.r_[True, pair_of[worst][1:] != pair_of[worst][:-1]]]
    k, out = trace.kernels, []
    p_gap = _reduce(k.end, prods, np.maximum)
    c_gap = _reduce(k.start, cons, np.minimum)
    for n, w in enumerate(head.tolist()):
        pk, ck = int(p[w]), int(c[w])
        o = index.order(pk, ck)
        out.append(PairVerdict(producer=_range_text(trace, int(prods.ranges[pi[n]])), consumer=_range_text(trace, int(cons.ranges[ci[n]])),
                               producer_stream=int(k.stream[pk]), consumer_stream=int(k.stream[ck]), verdict=o.verdict, edge=o.edge,
                               gap_ns=int(c_gap[ci[n]] - p_gap[pi[n]]),
                               producer_kernel=trace.kernel_name(pk), consumer_kernel=trace.kernel_name(ck), producer_rule=attr.rule_of(pk).value,
                               consumer_rule=attr.rule_of(ck).value,
                               producer_index=pk, consumer_index=ck))
    return out


def _match_instances(trace: Trace, prods: Instances, cons: Instances) -> list[tuple[int, int]]:
    """(consumer instance, producer instance) pairs: each consumer range with the last producer range
    of the same glob captures that started no later; consumers grouped by key in first-seen order."""
    start = trace.ranges.start
    by_key: dict[tuple[str, ...], list[tuple[int, int, int]]] = {}
    for i, (key, r) in enumerate(zip(prods.keys, prods.ranges.tolist())):
        by_key.setdefault(key, []).append((int(start[r]), r, i))
    for v in by_key.values():
        v.sort()
    consumers: dict[tuple[str, ...], list[tuple[int, int, int]]] = {}
    for i, (key, r) in enumerate(zip(cons.keys, cons.ranges.tolist())):
        consumers.setdefault(key, []).append((int(start[r]), r, i))
    out = []
    for key, items in consumers.items():
        candidates = by_key.get(key, [])
        starts = [s for s, _, _ in candidates]
        for c_start, c_rng, ci in sorted(items):
            at = bisect_right(starts, c_start) - 1
            if at >= 0 and candidates[at][1] == c_rng:  # never a range with itself ('*:*')
                at -= 1
            if at >= 0:
                out.append((ci, candidates[at][2]))
    return out


def _reduce(values: np.ndarray, inst: Instances, ufunc: np.ufunc) -> np.ndarray:
    """ufunc.reduce of values over each instance's kernels."""
    if len(inst.kernels) == 0:
        return np.zeros(0, dtype=np.int64)
    return ufunc.reduceat(values[inst.kernels], inst.offset[:-1])


def _range_text(trace: Trace, rng: int) -> str:
    return trace.strings[int(trace.ranges.text[rng])]


def all_pairs(trace: Trace, attr: Attribution, index: OrderingIndex) -> tuple[list[PairVerdict], dict[str, int]]:
    """Every kernel against the last kernel submitted before it on each other stream of its device,
    judged in bulk; PairVerdicts (with the edge) only for the listed ones, UNORDERED first."""
    k, col = trace.kernels, index.kernel_col
    order = np.lexsort((k.corr, col))
    bounds = np.searchsorted(col[order], np.arange(len(index.streams) + 1))
    per = {x: order[bounds[x]:bounds[x + 1]] for x in range(len(index.streams)) if bounds[x + 1] > bounds[x]}
    counts = np.zeros(len(VERDICTS), dtype=np.int64)
    listed: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
    for y, c_idx in per.items():
        for x, p_idx in per.items():
            if x == y or index.streams[x][0] != index.streams[y][0]:  # other streams of the same device
                continue
            pos = np.searchsorted(k.corr[p_idx], k.corr[c_idx]) - 1
            p, c = p_idx[pos[pos >= 0]], c_idx[pos >= 0]
            codes = index.verdicts(p, c)
            counts += np.bincount(codes, minlength=len(VERDICTS))
            for unordered in (True, False):
                room = MAX_LISTED_PAIRS - len(listed[unordered])
                if room > 0:
                    hit = np.flatnonzero((codes == UNORDERED) == unordered)[:room]
                    listed[unordered] += list(zip(p[hit].tolist(), c[hit].tolist()))
    pairs = [_kernel_pair(trace, attr, index, p, c) for p, c in listed[True] + listed[False]]
    return pairs, {v.value: int(n) for v, n in zip(VERDICTS, counts)}


def _kernel_pair(trace: Trace, attr: Attribution, index: OrderingIndex, p: int, c: int) -> PairVerdict:
    k, o = trace.kernels, index.order(p, c)
    return PairVerdict(producer=_range_name(trace, attr, p), consumer=_range_name(trace, attr, c), producer_stream=int(k.stream[p]),
                       consumer_stream=int(k.stream[c]),
                       verdict=o.verdict, edge=o.edge, gap_ns=int(k.start[c] - k.end[p]), producer_kernel=trace.kernel_name(p),
                       consumer_kernel=trace.kernel_name(c),
                       producer_rule=attr.rule_of(p).value, consumer_rule=attr.rule_of(c).value, producer_index=p, consumer_index=c)


def _range_name(trace: Trace, attr: Attribution, kernel: int) -> str:
    rng = int(attr.range_of_kernel[kernel])
    return _range_text(trace, rng) if rng >= 0 else "<unattributed>"


def analyze(trace: Trace, pairs: PairSpec | Sequence[GlobPair] | None = None, all_kernel_pairs: bool = False,
            hazards: bool = True) -> Analysis:
    """`pairs`: a PairSpec, or glob pairs (with `all_kernel_pairs` for mode all). `hazards`: judge
    memory hazards where the trace has memory access sets."""
    spec = PairSpec.coerce(pairs, all_kernel_pairs)
    memory = trace.memory is not None and trace.memory.recorded
    notes: tuple[str, ...] = ()
    if spec.implicit and memory and hazards:
        spec, notes = PairSpec(PairMode.NONE), (PAIRS_BY_MEMORY_NOTE,)
    elif spec.mode is PairMode.ALL and not memory:
        notes = (PAIRS_ALL_NOTE,)
    attr = attribute(trace)
    index = OrderingIndex(trace, attr.launch_tid, attr.launch_start)
    found: list[PairVerdict] = []
    counts = {v.value: 0 for v in Verdict}
    if spec.mode is PairMode.ALL:
        found, counts = all_pairs(trace, attr, index)
    for producer, consumer in spec.globs:
        found += glob_pairs(trace, attr, index, producer, consumer)
    if spec.mode is PairMode.GLOBS:
        require_matches(trace, attr, spec.globs, found, glob_regex)
        counts.update(Counter(p.verdict.value for p in found))
    haz = find_hazards(trace, attr, index) if hazards else None
    return Analysis(trace=trace, streams=stream_stats(trace), attribution=attr, pairs=tuple(found), pair_counts=counts,
                    event_edges=index.event_edges, unmatched_waits=index.unmatched_waits,
                    pair_spec=spec, hazards=haz, notes=notes)


def top_kernels(trace: Trace, n: int = 15) -> list[tuple[str, int, int]]:
    """(name, launches, total GPU ns) of the kernels with the most GPU time."""
    k = trace.kernels
    dur = k.end - k.start
    names, inverse = np.unique(k.name, return_inverse=True)
    total = np.bincount(inverse, weights=dur)
    count = np.bincount(inverse)
    order = np.argsort(-total)[:n]
    return [(trace.strings[int(names[i])], int(count[i]), int(total[i])) for i in order]
