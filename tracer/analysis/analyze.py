"""Stream statistics, producer -> consumer ordering verdicts and memory hazards: the JSON contract of
`tracer trace analyze`."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tracer.errors import UsageError
from tracer.schemas import header
from tracer.analysis.attribution import Attribution, attribute
from tracer.analysis.graphs import GraphReplays, on_launch_streams
from tracer.analysis.hazards import Hazards, find_hazards
from tracer.model.arrays import unique
from tracer.model.trace import KERNEL, OP_KINDS, PROCESS_SHIFT, Trace, expand_ranges, process_index, with_operations
from tracer.analysis.ordering import VERDICTS, Edge, OrderingIndex, Verdict, groups, stream_keys
from tracer.analysis.pairs import GlobPair, PairMode, PairSpec
from tracer.analysis.selection import require_matches


MAX_LISTED_PAIRS = 200
FEW_STREAMS = 64  # above this many streams, all_pairs counts pairs in bulk (bulk_pair_counts), not stream pair by pair
LIST_BUDGET = 1024  # (consumer, producer) stream pairs searched for listed examples, above FEW_STREAMS
UNORDERED = VERDICTS.index(Verdict.UNORDERED)
PAIRS_ALL_NOTE = ("--pairs all without memory access sets cannot tell races from independent work: "
                  "an UNORDERED pair may touch different memory (capture with --memory for hazards)")
PAIRS_BY_MEMORY_NOTE = ("pairs not judged by default: the trace has memory access sets, so hazards say which kernels "
                        "race on the same memory (--pairs all still lists the ordering of every pair)")


@dataclass(frozen=True, kw_only=True)
class StreamStats:
    device: int
    stream: int  # the trace-unique stream key (tracer.model.trace); the raw id in a one-process trace
    kernels: int  # kernels only
    busy_ns: int  # busy, idle, span and gaps: of every GPU operation on the stream
    idle_ns: int
    span_ns: int
    max_gap_ns: int
    operations: int = 0  # kernels, copies and memsets
    pid: int = -1  # the process (-1: unknown)
    raw_stream: int | None = None  # the process's own stream id (None: the same as stream)

    @property
    def label(self) -> str:
        raw = self.stream if self.raw_stream is None else self.raw_stream
        return f"stream {raw}" if self.raw_stream is None else f"pid {self.pid} stream {raw}"

    def to_json(self) -> dict[str, int]:
        out = {k: v for k, v in self.__dict__.items() if k != "raw_stream"}
        if self.raw_stream is not None:
            out["stream"], out["stream_key"] = self.raw_stream, self.stream
        return out


def stream_json(trace: Trace, key: int | None, prefix: str) -> dict[str, int | None]:
    """{prefix}stream: the process's own stream id, and {prefix}pid when the trace holds several processes."""
    if key is None or not trace.multi_process or key < 0:
        return {f"{prefix}stream": key}
    o = trace.stream_origin(key)
    return {f"{prefix}stream": o.stream, f"{prefix}pid": o.pid}


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
    producer_op: str = "kernel"  # which kind of GPU operation each side is (model.OpKind)
    consumer_op: str = "kernel"

    def to_json(self, trace: Trace | None = None) -> dict[str, object]:
        """With the trace, streams are the processes' own ids plus their pids when it holds several."""
        if trace is None:
            streams: dict[str, object] = {"producer_stream": self.producer_stream, "consumer_stream": self.consumer_stream}
            edge = self.edge.to_json() if self.edge else None
        else:
            streams = {**stream_json(trace, self.producer_stream, "producer_"), **stream_json(trace, self.consumer_stream, "consumer_")}
            edge = edge_json(trace, self.edge)
        return {"producer": self.producer, "consumer": self.consumer, **streams, "verdict": self.verdict.value,
                "edge": edge, "gap_ns": self.gap_ns,
                "producer_kernel": self.producer_kernel, "consumer_kernel": self.consumer_kernel,
                "producer_rule": self.producer_rule, "consumer_rule": self.consumer_rule,
                "producer_op": self.producer_op, "consumer_op": self.consumer_op}


def edge_json(trace: Trace, edge: Edge | None) -> dict[str, object] | None:
    if edge is None:
        return None
    out = edge.to_json()
    for side in ("record_", "wait_"):
        if f"{side}stream" in out:
            out.update(stream_json(trace, edge.record_stream if side == "record_" else edge.wait_stream, side))
    return out


class Section(Protocol):
    """A part of the verdict computed only on request (tracer.analysis.explain.Explained for --explain):
    analyze knows it by shape, so the explaining module can build on Analysis without a cycle."""

    def to_json(self) -> dict[str, object]: ...

    def text_lines(self) -> list[str]: ...


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
    graphs: GraphReplays = field(default_factory=GraphReplays)
    explained: Section | None = None  # where the time went (--explain; tracer.analysis.explain)

    def to_json(self) -> dict[str, object]:
        t = self.trace
        listed = [p for p in self.pairs if p.verdict is Verdict.UNORDERED][:MAX_LISTED_PAIRS]
        listed += [p for p in self.pairs if p.verdict is not Verdict.UNORDERED][: max(0, MAX_LISTED_PAIRS - len(listed))]
        return {
            **header("verdict"),
            "source": t.source, "producer": t.producer, "kernels": int((t.kernels.kinds() == 0).sum()),
            "operations": {kind.value: int((t.kernels.kinds() == i).sum()) for i, kind in enumerate(OP_KINDS)},
            "graph_launches": self.graphs.to_json(),
            "streams": [s.to_json() for s in self.streams],
            "unattributed": self.attribution.unattributed, "no_launch_record": self.attribution.no_launch_record,
            "attribution_rules": self.attribution.rule_counts(),
            "nvtx_ranges": int(len(t.ranges.start)), "memcpy": t.memcpy_count, "memset": t.memset_count,
            "syncs": dict(Counter(y.kind.value for y in t.syncs)), "event_records": len(t.records),
            "event_edges": self.event_edges, "unmatched_waits": self.unmatched_waits,
            "record_errors": {kind: {"lost": n, "first_error": first} for kind, (n, first) in t.record_errors.items()},
            "pair_spec": self.pair_spec.to_json(), "pair_counts": self.pair_counts,
            "pairs_listed": len(listed), "pairs": [p.to_json(t) for p in listed],
            "processes": list(t.processes),
            "hazards": self.hazards.to_json() if self.hazards else {"memory": bool(t.memory and t.memory.recorded),
                                                                    "checked": False},
            "warnings": list(self.warnings), "notes": list(self.notes),
            **({"time": self.explained.to_json()} if self.explained is not None else {}),
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
        if (fail_on_unordered or fail_on_hazard) and len(self.trace.kernels) == 0:
            out.append("the trace holds no kernel: nothing was judged")
        elif (fail_on_unordered or fail_on_hazard) and not (self.trace.kernels.kinds() == KERNEL).any():
            out.append(f"the trace holds no kernel, only {len(self.trace.kernels)} copies and memsets: its kernels were lost "
                       "or never recorded")
        if fail_on_unordered and self.unordered:
            out.append(f"{self.unordered} producer -> consumer pair(s) are UNORDERED")
        if fail_on_hazard:
            if self.hazards is None:
                raise UsageError("--fail-on-hazard needs the hazard check: drop --no-hazards")
            out += self.hazards.failures()
        if (fail_on_unordered or fail_on_hazard) and self.trace.record_errors:
            out.append(f"records were lost at capture ({', '.join(self.trace.record_errors)}): the trace is incomplete")
        return out

    def report_lines(self, hazards: bool = True) -> list[str]:
        """What the text report says beyond streams and pairs: warnings, attribution rules, notes, hazards."""
        lines = [f"warning: {w}" for w in self.warnings]
        rules = self.attribution.rule_counts()
        if rules["forward-op"] or rules["backward-caller"]:
            lines.append("attribution: " + ", ".join(f"{k} {v}" for k, v in rules.items()))
        lines += [f"note: {n}" for n in self.notes]
        guessed = self.graphs.launches - self.graphs.stream_recorded
        if guessed:
            lines.append(f"note: {guessed} CUDA graph launch(es) ordered on the stream of their first operation (the trace "
                         "does not say which stream they were launched on; `trace run --memory` records it)")
        if hazards and self.hazards is not None:
            lines += self.hazards.text_lines()
        if self.explained is not None:
            lines += self.explained.text_lines()
        return lines


def stream_stats(trace: Trace) -> tuple[StreamStats, ...]:
    """Per stream, in one pass over its operations sorted by start: busy, idle (gaps between the
    running end and the next start), span and the largest gap."""
    k = trace.kernels
    keys, inverse = stream_keys(k.device, k.stream)
    if not keys:
        return ()
    order = np.lexsort((k.start, inverse))
    seg, start = inverse[order], k.start[order]
    reach = _running_max_by(k.end[order], seg)
    heads = np.searchsorted(seg, np.arange(len(keys)))
    tails = np.r_[heads[1:], len(seg)] - 1
    gaps = np.r_[0, np.maximum(start[1:] - reach[:-1], 0)]
    gaps[heads] = 0  # a stream's first operation follows no gap
    idle, max_gap = np.add.reduceat(gaps, heads), np.maximum.reduceat(gaps, heads)
    span = reach[tails] - start[heads]
    kernels = np.add.reduceat((k.kinds()[order] == 0).astype(np.int64), heads)
    out = []
    for n, (dev, stream) in enumerate(keys):
        o = trace.stream_origin(stream)
        out.append(StreamStats(device=dev, stream=stream, kernels=int(kernels[n]), busy_ns=int(span[n] - idle[n]), idle_ns=int(idle[n]),
                               span_ns=int(span[n]), max_gap_ns=int(max_gap[n]), operations=int(tails[n] - heads[n] + 1), pid=o.pid,
                               raw_stream=o.stream if trace.multi_process else None))
    return tuple(out)


def _running_max_by(values: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """The running maximum of values, restarting where seg (sorted) changes: one accumulate over
    values lifted by segment, where the lift cannot overflow, else one per segment."""
    low, high = int(values.min()), int(values.max())
    lift = high - low + 1
    if int(seg[-1]) * lift < (1 << 62):
        out: np.ndarray = np.maximum.accumulate((values - low) + seg * lift) - seg * lift + low
        return out
    out = values.copy()
    bounds = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1], True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        out[a:b] = np.maximum.accumulate(values[a:b])
    return out


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
    for sid in unique(text).tolist():
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
                               producer_index=pk, consumer_index=ck, producer_op=op_kind(trace, pk), consumer_op=op_kind(trace, ck)))
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


def all_pairs(trace: Trace, attr: Attribution, index: OrderingIndex,
              few_streams: int = FEW_STREAMS) -> tuple[list[PairVerdict], dict[str, int]]:
    """Every kernel against the last kernel submitted before it on each other stream of its device,
    judged in bulk; PairVerdicts (with the edge) only for the listed ones, UNORDERED first. With more
    than `few_streams` streams, the pairs are counted without a loop over stream pairs
    (bulk_pair_counts) and examples are listed from the first LIST_BUDGET stream pairs."""
    k, col = trace.kernels, index.kernel_col
    order = np.lexsort((k.corr, col))
    bounds = np.searchsorted(col[order], np.arange(len(index.streams) + 1))
    per = {x: order[bounds[x]:bounds[x + 1]] for x in range(len(index.streams)) if bounds[x + 1] > bounds[x]}
    listed: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
    if len(per) > few_streams:
        counts = bulk_pair_counts(index, per, NextOn(index, order, bounds))
        _examples(index, per, listed)
    else:
        counts = np.zeros(len(VERDICTS), dtype=np.int64)
        for y, c_idx in per.items():
            for x in per:
                if x != y and index.streams[x][0] == index.streams[y][0]:  # other streams of the same device
                    _judge(index, per[x], c_idx, counts, listed)
    pairs = [_kernel_pair(trace, attr, index, p, c) for p, c in listed[True] + listed[False]]
    return pairs, {v.value: int(n) for v, n in zip(VERDICTS, counts)}


class NextOn:
    """The first correlation id at or above v on stream x, for arrays of (x, v), by one binary search
    over all kernels sorted by (stream, correlation id) (order, bounds: as all_pairs makes them)."""

    def __init__(self, index: OrderingIndex, order: np.ndarray, bounds: np.ndarray) -> None:
        corr = index.trace.kernels.corr[order]
        self.bounds, self.corr = bounds, corr
        self.low = int(corr.min()) if len(corr) else 0
        self.span = (int(corr.max()) if len(corr) else 0) - self.low + 2
        self.keys = index.kernel_col[order] * self.span + (corr - self.low) if len(bounds) * self.span < (1 << 62) else None
        self.first = np.where(bounds[1:] > bounds[:-1], corr[np.minimum(bounds[:-1], max(len(corr) - 1, 0))], NO_KERNEL)

    def __call__(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        if self.keys is None:
            at = np.array([self.bounds[a] + np.searchsorted(self.corr[self.bounds[a]:self.bounds[a + 1]], b)
                           for a, b in zip(x.tolist(), v.tolist())], dtype=np.int64).reshape(len(x))
        else:
            at = np.searchsorted(self.keys, x * self.span + (np.minimum(np.maximum(v, self.low), self.low + self.span - 1) - self.low))
        found = at < self.bounds[x + 1]
        out = np.full(len(x), NO_KERNEL, dtype=np.int64)
        out[found] = self.corr[at[found]]
        return out


NO_KERNEL = np.iinfo(np.int64).max


def _examples(index: OrderingIndex, per: dict[int, np.ndarray], listed: dict[bool, list[tuple[int, int]]]) -> None:
    """Listed pairs (not counted) from the first LIST_BUDGET (consumer, producer) stream pairs."""
    budget = LIST_BUDGET
    for y, c_idx in per.items():
        for x in per:
            if x != y and index.streams[x][0] == index.streams[y][0]:
                _judge(index, per[x], c_idx, None, listed)
                budget -= 1
                if budget <= 0 or _full(listed):
                    return


def bulk_pair_counts(index: OrderingIndex, per: dict[int, np.ndarray], next_on: NextOn) -> np.ndarray:
    """Verdict counts of every (consumer c, producer stream x) pair, x another stream of c's device,
    in time near-linear in kernels plus the event clock entries kernels read, not streams squared.

    A stream x no stream or event sync names (OrderingIndex.host_named) has the host frontier of its
    context's syncs, G(c), like every such stream of its device and process: counted for all of them
    at once as if no event ordered them (plain_pair_counts), then each event clock entry (x, E) of
    the wait c follows moves the pair to event-ordered where x's last kernel before c is below E
    (no kernel of x in [E, c)), out of host-synchronized where it was also below G, else out of
    unordered. Streams a sync names are judged one at a time against every consumer (_judge)."""
    k = index.trace.kernels
    named = index.host_named()
    base = np.zeros(len(index.streams), dtype=bool)
    base[list(per)] = True
    base &= ~named
    counts = plain_pair_counts(index, per, base, next_on) if base.any() else np.zeros(len(VERDICTS), dtype=np.int64)
    device = np.array([d for d, _ in index.streams], dtype=np.int64)
    consumers = np.concatenate(list(per.values()))
    for x in per:
        if named[x]:
            c = consumers[(device[index.kernel_col[consumers]] == device[x]) & (index.kernel_col[consumers] != x)]
            _judge(index, per[x], c, counts, None)
    g = _context_frontiers(index, per, base, device, consumers)
    process = np.array([s for _, s in index.streams], dtype=np.int64) >> PROCESS_SHIFT
    synced = {dev for (dev, _), front in g.items() if (front >= 0).any()}  # devices with a context sync that counts
    for y, c in per.items():
        xs, values, row = index.event_rows(y, c)
        keep = base[xs] & (device[xs] == device[y]) & (xs != y)
        ri, xi = np.nonzero((values >= 0) & keep[None, :])  # clock entries, by row
        if len(ri) == 0:
            continue
        on = xs[xi]  # the entries' streams
        after = next_on(on, values[ri, xi])  # x's first kernel at or after the entry
        if len(values) == 1 and int(device[y]) not in synced:  # one clock row, nothing host-synchronized: count only
            c_corr = k.corr[c[row >= 0]][:, None]
            moved = int(np.count_nonzero((next_on.first[on][None, :] < c_corr) & (after[None, :] >= c_corr)))
            counts[VERDICTS.index(Verdict.EVENT_ORDERED)] += moved
            counts[UNORDERED] -= moved
            continue
        start = np.searchsorted(ri, np.arange(len(values)))
        size = np.diff(np.append(start, len(ri)))
        cc = np.flatnonzero(row >= 0)
        e = expand_ranges(start[row[cc]], size[row[cc]])  # (consumer, entry of its row) pairs
        ci = np.repeat(cc, size[row[cc]])
        c_corr = k.corr[c[ci]]
        event = (next_on.first[on[e]] < c_corr) & (after[e] >= c_corr)
        ex, ec, c_corr = on[e[event]], c[ci[event]], c_corr[event]
        front = np.full(len(ex), -1, dtype=np.int64)
        for p, m in groups(process[ex]):
            front[m] = g[(int(device[y]), p)][ec[m]]
        hosted = front >= 0
        hosted[hosted] = next_on(ex[hosted], front[hosted]) >= c_corr[hosted]  # the pair was counted host-synchronized
        counts[VERDICTS.index(Verdict.EVENT_ORDERED)] += len(ex)
        counts[VERDICTS.index(Verdict.HOST_SYNCHRONIZED)] -= int(hosted.sum())
        counts[UNORDERED] -= int((~hosted).sum())
    return counts


def _context_frontiers(index: OrderingIndex, per: dict[int, np.ndarray], base: np.ndarray, device: np.ndarray,
                       consumers: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """Per (device, process) of the base streams: G(c) for every consumer on that device (indexed by
    kernel; -1 elsewhere), the host frontier of any base stream of the group."""
    out: dict[tuple[int, int], np.ndarray] = {}
    c_dev = device[index.kernel_col[consumers]]
    for x in per:
        key = (int(device[x]), int(process_index(index.streams[x][1])))
        if base[x] and key not in out:
            g = np.full(len(index.trace.kernels.corr), -1, dtype=np.int64)
            c = consumers[c_dev == key[0]]
            g[c] = index.host_frontier(c, x)
            out[key] = g
    return out


def _full(listed: dict[bool, list[tuple[int, int]]]) -> bool:
    return all(len(v) >= MAX_LISTED_PAIRS for v in listed.values())


def _judge(index: OrderingIndex, p_idx: np.ndarray, c_idx: np.ndarray, counts: np.ndarray | None,
           listed: dict[bool, list[tuple[int, int]]] | None) -> None:
    """Each consumer against the last producer submitted before it (producers sorted by correlation
    id): verdicts added to counts (None: counted elsewhere), the first ones of each kind to listed."""
    k = index.trace.kernels
    pos = np.searchsorted(k.corr[p_idx], k.corr[c_idx]) - 1
    p, c = p_idx[pos[pos >= 0]], c_idx[pos >= 0]
    codes = index.verdicts(p, c)
    if counts is not None:
        counts += np.bincount(codes, minlength=len(VERDICTS))
    if listed is None:
        return
    for unordered in (True, False):
        room = MAX_LISTED_PAIRS - len(listed[unordered])
        if room > 0:
            hit = np.flatnonzero((codes == UNORDERED) == unordered)[:room]
            listed[unordered] += list(zip(p[hit].tolist(), c[hit].tolist()))


def plain_pair_counts(index: OrderingIndex, per: dict[int, np.ndarray], plain: np.ndarray, next_on: NextOn) -> np.ndarray:
    """Verdict counts of every (consumer c, plain producer stream x) pair, x another stream of c's
    device, without a loop over x. For a plain x the pair is HOST_SYNCHRONIZED exactly when x's last
    kernel before c was submitted below G(c), the frontier of c's context syncs (host_frontier of any
    plain stream of that device and process), else UNORDERED. So per c: n = plain streams with a
    kernel before c, h = n - plain streams with a kernel in [G(c), c) (distinct streams in a range
    of correlation ids: `distinct_in_ranges`)."""
    k = index.trace.kernels
    counts = np.zeros(len(VERDICTS), dtype=np.int64)
    consumers = np.concatenate(list(per.values()))
    c_dev = np.array([index.streams[x][0] for x in index.kernel_col[consumers].tolist()], dtype=np.int64)
    groups: dict[tuple[int, int], list[int]] = {}
    for x in per:
        if plain[x]:
            groups.setdefault((index.streams[x][0], int(process_index(index.streams[x][1]))), []).append(x)
    for (dev, _), xs in groups.items():
        c = consumers[c_dev == dev]
        if len(c) == 0:
            continue
        kern = np.concatenate([per[x] for x in xs])
        stream_of = np.repeat(np.arange(len(xs)), [len(per[x]) for x in xs])
        by_corr = np.argsort(k.corr[kern], kind="stable")
        corr, stream_of = k.corr[kern][by_corr], stream_of[by_corr]
        first = np.sort(np.array([k.corr[per[x]].min() for x in xs], dtype=np.int64))
        c_corr = k.corr[c]
        mine = np.isin(index.kernel_col[c], np.array(xs, dtype=np.int64))  # c's own stream is in the group
        before = np.searchsorted(first, c_corr) - (mine & (c_corr > next_on.first[index.kernel_col[c]]))
        g = index.host_frontier(c, xs[0])
        lo, hi = np.searchsorted(corr, np.maximum(g, 0)), np.searchsorted(corr, c_corr)
        touched = distinct_in_ranges(stream_of, lo, hi)  # plain streams with a kernel in [G, c)
        touched -= mine & (next_on(index.kernel_col[c], np.maximum(g, 0)) < c_corr)  # c's own stream has a kernel in [G, c)
        host = np.where(g >= 0, before - touched, 0)
        counts[VERDICTS.index(Verdict.HOST_SYNCHRONIZED)] += int(host.sum())
        counts[UNORDERED] += int((before - host).sum())
    return counts


def distinct_in_ranges(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each query, the number of distinct values among values[lo:hi]: a position j counts when
    the previous position with its value is below lo, so the answer is #{j < hi: prev[j] < lo} - lo
    (every j < lo has prev[j] < lo), counted offline with a Fenwick tree over prev (queries by hi)."""
    n = len(values)
    prev = np.full(n, -1, dtype=np.int64)
    order = np.lexsort((np.arange(n), values))
    same = np.r_[False, values[order][1:] == values[order][:-1]] if n else np.zeros(0, dtype=bool)
    prev[order[same]] = order[np.flatnonzero(same) - 1]
    tree = [0] * (n + 2)
    out = np.zeros(len(lo), dtype=np.int64)
    at = 0
    slot = (prev + 2).tolist()  # Fenwick slots start at 1; prev -1 is slot 1
    for q in np.argsort(hi, kind="stable").tolist():
        h, l_ = int(hi[q]), int(lo[q])
        while at < h:
            i = slot[at]
            while i <= n + 1:
                tree[i] += 1
                i += i & -i
            at += 1
        total, i = 0, l_ + 1  # prev[j] < lo  <=>  slot <= lo + 1
        while i > 0:
            total += tree[i]
            i -= i & -i
        out[q] = max(total - l_, 0) if h > l_ else 0
    return out


def _kernel_pair(trace: Trace, attr: Attribution, index: OrderingIndex, p: int, c: int) -> PairVerdict:
    k, o = trace.kernels, index.order(p, c)
    return PairVerdict(producer=_range_name(trace, attr, p), consumer=_range_name(trace, attr, c), producer_stream=int(k.stream[p]),
                       consumer_stream=int(k.stream[c]),
                       verdict=o.verdict, edge=o.edge, gap_ns=int(k.start[c] - k.end[p]), producer_kernel=trace.kernel_name(p),
                       consumer_kernel=trace.kernel_name(c),
                       producer_rule=attr.rule_of(p).value, consumer_rule=attr.rule_of(c).value, producer_index=p, consumer_index=c,
                       producer_op=op_kind(trace, p), consumer_op=op_kind(trace, c))


def op_kind(trace: Trace, i: int) -> str:
    op = trace.kernels.op
    return OP_KINDS[int(op[i])].value if op is not None else "kernel"


def _range_name(trace: Trace, attr: Attribution, kernel: int) -> str:
    rng = int(attr.range_of_kernel[kernel])
    return _range_text(trace, rng) if rng >= 0 else "<unattributed>"


def analyze(trace: Trace, pairs: PairSpec | Sequence[GlobPair] | None = None, all_kernel_pairs: bool = False,
            hazards: bool = True, streams: bool = True) -> Analysis:
    """`pairs`: a PairSpec, or glob pairs (with `all_kernel_pairs` for mode all). `hazards`: judge
    memory hazards where the trace has memory access sets. `streams` False: no per-stream statistics
    (Analysis.streams empty), for callers that keep none of them (`tracer diff`)."""
    spec = PairSpec.coerce(pairs, all_kernel_pairs)
    memory = trace.memory is not None and trace.memory.recorded
    notes: tuple[str, ...] = ()
    if spec.implicit and memory and hazards:
        spec, notes = PairSpec(PairMode.NONE), (PAIRS_BY_MEMORY_NOTE,)
    elif spec.mode is PairMode.ALL and not memory:
        notes = (PAIRS_ALL_NOTE,)
    trace, graphs, launches = on_launch_streams(with_operations(trace))
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
    haz = find_hazards(trace, attr, index, launches) if hazards else None
    return Analysis(trace=trace, streams=stream_stats(trace) if streams else (), attribution=attr, pairs=tuple(found),
                    pair_counts=counts, event_edges=index.event_edges, unmatched_waits=index.unmatched_waits,
                    pair_spec=spec, hazards=haz, notes=notes, graphs=graphs)


def top_kernels(trace: Trace, n: int = 15) -> list[tuple[str, int, int]]:
    """(name, launches, total GPU ns) of the kernels with the most GPU time."""
    k = trace.kernels
    dur = k.end - k.start
    names, inverse = np.unique(k.name, return_inverse=True)
    total = np.bincount(inverse, weights=dur)
    count = np.bincount(inverse)
    order = np.argsort(-total)[:n]
    return [(trace.strings[int(names[i])], int(count[i]), int(total[i])) for i in order]
