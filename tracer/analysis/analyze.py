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
from tracer.model.trace import KERNEL, OP_KINDS, Trace, process_index, with_operations
from tracer.analysis.ordering import VERDICTS, Edge, OrderingIndex, Verdict, stream_keys
from tracer.analysis.pairs import GlobPair, PairMode, PairSpec
from tracer.analysis.selection import require_matches


MAX_LISTED_PAIRS = 200
FEW_STREAMS = 64  # above this many streams, all_pairs counts producers on plain streams at once
LIST_BUDGET = 4096  # (consumer, plain producer) stream pairs searched for listed examples
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
        o = trace.stream_origin(stream)
        kernels = int((k.kinds()[idx] == 0).sum())
        out.append(StreamStats(device=dev, stream=stream, kernels=kernels, busy_ns=span - idle, idle_ns=idle, span_ns=span,
                               max_gap_ns=int(gaps.max()) if len(gaps) else 0,
                               operations=len(idx), pid=o.pid, raw_stream=o.stream if trace.multi_process else None))
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
    than `few_streams` streams, producers on plain streams (OrderingIndex.plain_streams) are
    counted for all of them at once (plain_pair_counts) instead of stream by stream."""
    k, col = trace.kernels, index.kernel_col
    order = np.lexsort((k.corr, col))
    bounds = np.searchsorted(col[order], np.arange(len(index.streams) + 1))
    per = {x: order[bounds[x]:bounds[x + 1]] for x in range(len(index.streams)) if bounds[x + 1] > bounds[x]}
    counts = np.zeros(len(VERDICTS), dtype=np.int64)
    listed: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
    plain = index.plain_streams() if len(per) > few_streams else np.zeros(len(index.streams), dtype=bool)
    if plain.any():
        counts += plain_pair_counts(index, per, plain)
    rich = [x for x in per if not plain[x]]
    budget = LIST_BUDGET  # (consumer, plain producer) stream pairs tried for listed examples
    for y, c_idx in per.items():
        for x in rich:
            if x != y and index.streams[x][0] == index.streams[y][0]:  # other streams of the same device
                _judge(index, per[x], c_idx, counts, listed)
        for x in np.flatnonzero(plain).tolist() if budget > 0 and not _full(listed) else ():
            if x in per and x != y and index.streams[x][0] == index.streams[y][0]:
                _judge(index, per[x], c_idx, None, listed)  # counted by plain_pair_counts
                budget -= 1
                if budget <= 0 or _full(listed):
                    break
    pairs = [_kernel_pair(trace, attr, index, p, c) for p, c in listed[True] + listed[False]]
    return pairs, {v.value: int(n) for v, n in zip(VERDICTS, counts)}


def _full(listed: dict[bool, list[tuple[int, int]]]) -> bool:
    return all(len(v) >= MAX_LISTED_PAIRS for v in listed.values())


def _judge(index: OrderingIndex, p_idx: np.ndarray, c_idx: np.ndarray, counts: np.ndarray | None,
           listed: dict[bool, list[tuple[int, int]]]) -> None:
    """Each consumer against the last producer submitted before it (both sorted by correlation id):
    verdicts added to counts (None: counted elsewhere), the first ones of each kind to listed."""
    k = index.trace.kernels
    pos = np.searchsorted(k.corr[p_idx], k.corr[c_idx]) - 1
    p, c = p_idx[pos[pos >= 0]], c_idx[pos >= 0]
    codes = index.verdicts(p, c)
    if counts is not None:
        counts += np.bincount(codes, minlength=len(VERDICTS))
    for unordered in (True, False):
        room = MAX_LISTED_PAIRS - len(listed[unordered])
        if room > 0:
            hit = np.flatnonzero((codes == UNORDERED) == unordered)[:room]
            listed[unordered] += list(zip(p[hit].tolist(), c[hit].tolist()))


def plain_pair_counts(index: OrderingIndex, per: dict[int, np.ndarray], plain: np.ndarray) -> np.ndarray:
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
        before = np.searchsorted(first, c_corr) - (mine & (c_corr > _first_on(index, per, c)))
        g = index.host_frontier(c, xs[0])
        lo, hi = np.searchsorted(corr, np.maximum(g, 0)), np.searchsorted(corr, c_corr)
        touched = distinct_in_ranges(stream_of, lo, hi)  # plain streams with a kernel in [G, c)
        touched -= mine & _own_in_range(index, per, c, g)
        host = np.where(g >= 0, before - touched, 0)
        counts[VERDICTS.index(Verdict.HOST_SYNCHRONIZED)] += int(host.sum())
        counts[UNORDERED] += int((before - host).sum())
    return counts


def _first_on(index: OrderingIndex, per: dict[int, np.ndarray], c: np.ndarray) -> np.ndarray:
    """The lowest correlation id on each kernel's own stream."""
    k = index.trace.kernels
    low = np.full(len(index.streams), -1, dtype=np.int64)
    for x, idx in per.items():
        low[x] = k.corr[idx].min()
    first: np.ndarray = low[index.kernel_col[c]]
    return first


def _own_in_range(index: OrderingIndex, per: dict[int, np.ndarray], c: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Whether each consumer's own stream has a kernel with correlation id in [g, c) (counted among
    the touched streams, but no producer of its own consumers)."""
    k = index.trace.kernels
    out = np.zeros(len(c), dtype=bool)
    for x in np.unique(index.kernel_col[c]).tolist():
        m = index.kernel_col[c] == x
        own = np.sort(k.corr[per[x]])
        out[m] = np.searchsorted(own, k.corr[c[m]]) > np.searchsorted(own, np.maximum(g[m], 0))
    return out


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
    return Analysis(trace=trace, streams=stream_stats(trace), attribution=attr, pairs=tuple(found), pair_counts=counts, event_edges=index.event_edges,
                    unmatched_waits=index.unmatched_waits,
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
