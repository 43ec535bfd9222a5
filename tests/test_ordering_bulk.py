"""The ordering of many streams that record and wait on events, judged in bulk (lazy sparse event
clocks, OrderingIndex; bulk_pair_counts), against a brute-force reference on random small traces:
vector clocks kept as Python dicts for every stream in one sweep, every kernel pair judged one at a
time, every other stream's last kernel before each consumer counted one by one. Host syncs are
judged in the reference by OrderingIndex._host_edge, the per-pair search order() uses, which the
bulk path does not call."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from tests.trace_synthetic import TraceBuilder
from tracer.analysis.analyze import all_pairs
from tracer.analysis.attribution import attribute, join_launches
from tracer.readers.load import load_trace
from tracer.model.trace import SyncKind, Trace
from tracer.analysis import ordering
from tracer.analysis.ordering import VERDICTS, OrderingIndex, Verdict


def _random_trace(path: Path, seed: int, streams: int, device_syncs: bool = True) -> Path:
    """Launches on random streams of two devices and two host threads, with event records, waits
    on random earlier records (chains, fan-in and fan-out arise), and some stream, event and (unless
    not device_syncs) device syncs."""
    rnd, b = random.Random(seed), TraceBuilder()
    recorded: list[tuple[int, int]] = []  # (key, device)
    for _ in range(12 * streams):
        dev, tid = rnd.randrange(2), 4242 + rnd.randrange(2)
        s = 100 + rnd.randrange(streams)
        r = rnd.random()
        if r < 0.5:
            b.launch(s, name="k", device=dev, tid=tid)
        elif r < 0.7:
            recorded.append((b.record(s, device=dev, tid=tid), dev))
        elif r < 0.9 and recorded:
            key, d = rnd.choice(recorded[-3 * streams:])
            b.wait(s, key, device=d, tid=tid)
        elif r < 0.93:
            b.stream_sync(s, device=dev, tid=tid)
        elif r < 0.96 and recorded:
            b.event_sync(rnd.choice(recorded)[0], tid=tid)
        elif r < 0.97 and device_syncs:
            b.device_sync(device=dev, tid=tid)
    return b.write(path)


def _reference_clocks(t: Trace, index: OrderingIndex) -> dict[int, list[tuple[int, dict[int, int]]]]:
    """Per stream: (wait corr, the stream's clock after it) for each matched wait, clocks as dicts."""
    ops = sorted([(r.corr, 0, r) for r in t.records] + [(w.corr, 1, w) for w in t.syncs if w.kind is SyncKind.WAIT],
                 key=lambda o: (o[0], o[1]))
    cur: dict[int, dict[int, int]] = {}
    at_record: dict[int, dict[int, int]] = {}
    out: dict[int, list[tuple[int, dict[int, int]]]] = {}
    for corr, what, op in ops:
        s = index.col[(op.device, op.stream)]
        if what == 0:
            own = dict(cur.get(s, {}))
            own[s] = max(own.get(s, -1), corr)
            at_record[op.key] = own
        elif op.key in at_record:
            merged = dict(cur.get(s, {}))
            for x, v in at_record[op.key].items():
                merged[x] = max(merged.get(x, -1), v)
            cur[s] = merged
            out.setdefault(s, []).append((corr, merged))
    return out


def _reference_verdict(index: OrderingIndex, clocks: dict[int, list[tuple[int, dict[int, int]]]], p: int, c: int) -> Verdict:
    k = index.trace.kernels
    x, y = int(index.kernel_col[p]), int(index.kernel_col[c])
    p_corr, c_corr = int(k.corr[p]), int(k.corr[c])
    if x == y and p_corr < c_corr:
        return Verdict.SAME_STREAM
    before = [clock for corr, clock in clocks.get(y, []) if corr < c_corr]
    if x != y and before and p_corr < before[-1].get(x, -1):
        return Verdict.EVENT_ORDERED
    return Verdict.HOST_SYNCHRONIZED if index._host_edge(p, c) is not None else Verdict.UNORDERED


def _reference_counts(index: OrderingIndex, clocks: dict[int, list[tuple[int, dict[int, int]]]]) -> dict[str, int]:
    k = index.trace.kernels
    counts = dict.fromkeys((v.value for v in VERDICTS), 0)
    cols = index.kernel_col.tolist()
    for c in range(len(k.corr)):
        for x in set(cols):
            if x == cols[c] or index.streams[x][0] != index.streams[cols[c]][0]:
                continue
            before = [p for p in range(len(k.corr)) if cols[p] == x and k.corr[p] < k.corr[c]]
            if before:
                p = max(before, key=lambda i: (int(k.corr[i]), -i))
                counts[_reference_verdict(index, clocks, p, c).value] += 1
    return counts


@pytest.fixture(params=["dense", "sparse"])
def clocks_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways event clocks are computed: dense rows in the one pass (few recording streams) and
    sparse clocks where they are read (many)."""
    if request.param == "sparse":
        monkeypatch.setattr(ordering, "DENSE_CLOCK_ENTRIES", -1)
    return str(request.param)


@pytest.mark.parametrize("seed", range(8))
def test_bulk_ordering_matches_a_brute_force_reference(tmp_path: Path, seed: int, clocks_kind: str) -> None:
    t = load_trace(_random_trace(tmp_path / "t.sqlite", seed, streams=14 + 3 * seed, device_syncs=seed % 2 == 0))
    index = OrderingIndex(t, *join_launches(t))
    assert (index._dense is None) is (clocks_kind == "sparse")
    clocks = _reference_clocks(t, index)
    n = len(t.kernels.corr)
    p, c = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    want = [_reference_verdict(index, clocks, i, j) for i, j in zip(p.tolist(), c.tolist())]
    got = [VERDICTS[v] for v in index.verdicts(p, c).tolist()]
    assert got == want
    assert [index.order(i, j).verdict for i, j in zip(p.tolist(), c.tolist())] == want
    reference = _reference_counts(index, clocks)
    attr = attribute(t)
    assert all_pairs(t, attr, index, few_streams=0)[1] == reference == all_pairs(t, attr, index, few_streams=10**9)[1]
    assert reference["event-ordered"] and reference["host-synchronized"] and reference["unordered"]


def test_an_event_edge_names_the_earliest_wait_that_orders_the_pair(tmp_path: Path, clocks_kind: str) -> None:
    t = load_trace(_random_trace(tmp_path / "t.sqlite", 3, streams=20))
    index = OrderingIndex(t, *join_launches(t))
    clocks = _reference_clocks(t, index)
    k, seen = t.kernels, 0
    for p in range(len(k.corr)):
        for c in range(len(k.corr)):
            o = index.order(p, c)
            if o.verdict is not Verdict.EVENT_ORDERED:
                continue
            x, y = int(index.kernel_col[p]), int(index.kernel_col[c])
            first = next(corr for corr, clock in clocks[y] if k.corr[p] < clock.get(x, -1))
            assert o.edge is not None and o.edge.wait_corr == first
            seen += 1
    assert seen > 20
