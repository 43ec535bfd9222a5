"""Stream statistics and producer -> consumer ordering verdicts: the JSON contract of
`tracer trace analyze`."""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracer.trace.attribution import Attribution, attribute
from tracer.trace.model import Kernels, Trace
from tracer.trace.ordering import Edge, Ordered, OrderingIndex, Verdict
from tracer.trace.pairs import GlobPair, PairMode, PairSpec, parse_pair

MAX_LISTED_PAIRS = 200


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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

    def to_json(self) -> dict[str, object]:
        return {"producer": self.producer, "consumer": self.consumer, "producer_stream": self.producer_stream,
                "consumer_stream": self.consumer_stream, "verdict": self.verdict.value,
                "edge": self.edge.to_json() if self.edge else None, "gap_ns": self.gap_ns,
                "producer_kernel": self.producer_kernel, "consumer_kernel": self.consumer_kernel}


@dataclass(frozen=True)
class Analysis:
    trace: Trace
    streams: tuple[StreamStats, ...]
    attribution: Attribution
    pairs: tuple[PairVerdict, ...]
    pair_counts: dict[str, int]
    event_edges: int
    unmatched_waits: int
    pair_spec: PairSpec

    def to_json(self) -> dict[str, object]:
        t = self.trace
        listed = [p for p in self.pairs if p.verdict is Verdict.UNORDERED][:MAX_LISTED_PAIRS]
        listed += [p for p in self.pairs if p.verdict is not Verdict.UNORDERED][: max(0, MAX_LISTED_PAIRS - len(listed))]
        return {
            "source": t.source, "producer": t.producer, "kernels": len(t.kernels),
            "streams": [s.to_json() for s in self.streams],
            "unattributed": self.attribution.unattributed, "no_launch_record": self.attribution.no_launch_record,
            "nvtx_ranges": int(len(t.ranges.start)), "memcpy": t.memcpy_count, "memset": t.memset_count,
            "syncs": dict(Counter(y.kind.value for y in t.syncs)), "event_records": len(t.records),
            "event_edges": self.event_edges, "unmatched_waits": self.unmatched_waits,
            "pair_spec": self.pair_spec.to_json(), "pair_counts": self.pair_counts,
            "pairs_listed": len(listed), "pairs": [p.to_json() for p in listed],
        }

    @property
    def unordered(self) -> int:
        return self.pair_counts.get(Verdict.UNORDERED.value, 0)


def stream_stats(trace: Trace) -> tuple[StreamStats, ...]:
    k = trace.kernels
    out = []
    for dev, stream in sorted({(int(d), int(s)) for d, s in zip(k.device, k.stream)}):
        idx = np.nonzero((k.device == dev) & (k.stream == stream))[0]
        start, end = k.start[idx], k.end[idx]
        order = np.argsort(start, kind="stable")
        start, end = start[order], np.maximum.accumulate(end[order])
        gaps = np.maximum(start[1:] - end[:-1], 0)
        span = int(end[-1] - start[0])
        idle = int(gaps.sum())
        out.append(StreamStats(dev, stream, len(idx), span - idle, idle, span, int(gaps.max()) if len(gaps) else 0))
    return tuple(out)


def glob_regex(glob: str) -> re.Pattern[str]:
    """`*` captures any text (the captures pair a producer with its consumer), `?` one character."""
    parts = [("(.*)" if ch == "*" else "(.)" if ch == "?" else re.escape(ch)) for ch in glob]
    return re.compile("^" + "".join(parts) + "$")


parse_pair_spec = parse_pair  # the name commands import


def _instances(trace: Trace, attr: Attribution, glob: str) -> dict[tuple[str, ...], list[tuple[int, int, list[int]]]]:
    """key (the glob's captures) -> [(range start, range index, kernels)] for matching ranges."""
    rx = glob_regex(glob)
    matches: dict[int, tuple[str, ...] | None] = {}
    by_range: dict[int, list[int]] = defaultdict(list)
    for kern, rng in enumerate(attr.range_of_kernel):
        if rng < 0:
            continue
        sid = int(trace.ranges.text[rng])
        if sid not in matches:
            m = rx.match(trace.strings[sid])
            matches[sid] = m.groups() if m else None
        if matches[sid] is not None:
            by_range[int(rng)].append(kern)
    out: dict[tuple[str, ...], list[tuple[int, int, list[int]]]] = defaultdict(list)
    for rng, kernels in by_range.items():
        key = matches[int(trace.ranges.text[rng])]
        out[key].append((int(trace.ranges.start[rng]), rng, kernels))  # type: ignore[index]
    for v in out.values():
        v.sort()
    return out


def _frontier(k: Kernels, kernels: list[int], last: bool) -> list[int]:
    """Per stream, the producer submitted last (or the consumer submitted first): if it is
    ordered, so are the others on its stream, by stream order."""
    best: dict[tuple[int, int], int] = {}
    for i in kernels:
        key = (int(k.device[i]), int(k.stream[i]))
        j = best.get(key)
        if j is None or (k.corr[i] > k.corr[j]) == last:
            best[key] = i
    return list(best.values())


def _worst(index: OrderingIndex, ps: list[int], cs: list[int]) -> tuple[Ordered, int, int]:
    k = index.trace.kernels
    worst: tuple[Ordered, int, int] | None = None
    for p in _frontier(k, ps, last=True):
        for c in _frontier(k, cs, last=False):
            o = index.order(p, c)
            if worst is None or o.verdict.severity > worst[0].verdict.severity:
                worst = (o, p, c)
    assert worst is not None
    return worst


def glob_pairs(trace: Trace, attr: Attribution, index: OrderingIndex, producer: str, consumer: str) -> list[PairVerdict]:
    prods, cons = _instances(trace, attr, producer), _instances(trace, attr, consumer)
    k, out = trace.kernels, []
    for key, consumers in cons.items():
        candidates = prods.get(key, [])
        for c_start, c_rng, c_kernels in consumers:
            before = [p for p in candidates if p[0] <= c_start]
            if not before:
                continue
            _, p_rng, p_kernels = before[-1]
            o, p, c = _worst(index, p_kernels, c_kernels)
            out.append(PairVerdict(
                trace.strings[int(trace.ranges.text[p_rng])], trace.strings[int(trace.ranges.text[c_rng])],
                int(k.stream[p]), int(k.stream[c]), o.verdict, o.edge,
                int(k.start[c_kernels].min() - k.end[p_kernels].max()), trace.kernel_name(p), trace.kernel_name(c)))
    return out


def all_pairs(trace: Trace, attr: Attribution, index: OrderingIndex) -> list[PairVerdict]:
    """Every kernel against the last kernel submitted before it on each other stream."""
    k = trace.kernels
    keys = sorted({(int(d), int(s)) for d, s in zip(k.device, k.stream)})
    per = {key: np.nonzero((k.device == key[0]) & (k.stream == key[1]))[0] for key in keys}
    per = {key: idx[np.argsort(k.corr[idx], kind="stable")] for key, idx in per.items()}
    out = []
    for cy, c_idx in per.items():
        for px, p_idx in per.items():
            if px == cy or px[0] != cy[0] or len(p_idx) == 0:  # other streams of the same device
                continue
            pos = np.searchsorted(k.corr[p_idx], k.corr[c_idx]) - 1
            for c, j in zip(c_idx[pos >= 0], pos[pos >= 0]):
                p = int(p_idx[j])
                o = index.order(p, int(c))
                out.append(PairVerdict(_range_name(trace, attr, p), _range_name(trace, attr, int(c)), px[1], cy[1],
                                       o.verdict, o.edge, int(k.start[c] - k.end[p]), trace.kernel_name(p), trace.kernel_name(int(c))))
    return out


def _range_name(trace: Trace, attr: Attribution, kernel: int) -> str:
    rng = int(attr.range_of_kernel[kernel])
    return trace.strings[int(trace.ranges.text[rng])] if rng >= 0 else "<unattributed>"


def analyze(trace: Trace, pairs: PairSpec | Sequence[GlobPair] | None = None, all_kernel_pairs: bool = False) -> Analysis:
    """`pairs`: a PairSpec, or glob pairs (with `all_kernel_pairs` for mode all)."""
    spec = PairSpec.coerce(pairs, all_kernel_pairs)
    attr = attribute(trace)
    index = OrderingIndex(trace, attr.launch_tid, attr.launch_start)
    found: list[PairVerdict] = []
    if spec.mode is PairMode.ALL:
        found = all_pairs(trace, attr, index)
    for producer, consumer in spec.globs:
        found += glob_pairs(trace, attr, index, producer, consumer)
    counts = {v.value: 0 for v in Verdict}
    counts.update(Counter(p.verdict.value for p in found))
    return Analysis(trace, stream_stats(trace), attr, tuple(found), counts, index.event_edges, index.unmatched_waits, spec)


def top_kernels(trace: Trace, n: int = 15) -> list[tuple[str, int, int]]:
    """(name, launches, total GPU ns) of the kernels with the most GPU time."""
    k = trace.kernels
    dur = k.end - k.start
    names, inverse = np.unique(k.name, return_inverse=True)
    total = np.bincount(inverse, weights=dur)
    count = np.bincount(inverse)
    order = np.argsort(-total)[:n]
    return [(trace.strings[int(names[i])], int(count[i]), int(total[i])) for i in order]
