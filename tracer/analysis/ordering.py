"""Happens-before between kernels: stream order, event record -> stream wait edges, and host
synchronisations (stream, event and context syncs, and successful event/stream queries).

Within a stream, work runs in submission order, which is correlation-id order. An event record
on stream X at correlation r, waited on by stream Y at correlation w, orders everything submitted
to X before r ahead of everything submitted to Y after w. Vector clocks over the records and waits
(processed in correlation order, since a record is always submitted before the waits naming it)
make each query a binary search, transitive chains included.

In bulk, each kernel c has a frontier per other stream x: a correlation id F such that a kernel p
on x is ordered before c exactly when p's correlation id is below F (one for event edges, one for
host syncs). `order()` answers one pair with the edge that orders it; `verdicts()` answers arrays of
pairs with the same verdicts and no edges.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from tracer.format.memory_tables import QUERY_EVENT, QUERY_STREAM
from tracer.model.arrays import unique
from tracer.model.trace import EventRecord, Sync, SyncKind, Trace, process_index

StreamKey = tuple[int, int]  # (device, stream key: trace-unique, its process above PROCESS_SHIFT)
HOST_KINDS = (SyncKind.STREAM, SyncKind.EVENT, SyncKind.CONTEXT)


class Verdict(str, Enum):
    SAME_STREAM = "same-stream"
    EVENT_ORDERED = "event-ordered"
    HOST_SYNCHRONIZED = "host-synchronized"
    UNORDERED = "unordered"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {v: i for i, v in enumerate(Verdict)}
VERDICTS = tuple(Verdict)  # verdict codes are positions here, which are also severities


class EdgeKind(str, Enum):
    STREAM_ORDER = "stream-order"
    EVENT = "event"
    HOST_SYNC = "host-sync"


@dataclass(frozen=True, kw_only=True)
class Edge:
    """The evidence that orders a pair."""

    kind: EdgeKind
    record_stream: int | None = None
    record_corr: int | None = None
    wait_stream: int | None = None
    wait_corr: int | None = None
    key: int | None = None
    api: str | None = None

    def to_json(self) -> dict[str, object]:
        out = {k: v for k, v in self.__dict__.items() if v is not None}
        out["kind"] = self.kind.value
        return out


@dataclass(frozen=True)
class Ordered:
    verdict: Verdict
    edge: Edge | None


@dataclass(frozen=True)
class HostCover:
    """Host syncs covering one stream, as arrays: a kernel p on it is done once a sync with
    value > p's correlation id returned; `corr`, `end`, `tid` say when the sync counts for a consumer."""

    value: np.ndarray
    corr: np.ndarray
    end: np.ndarray
    tid: np.ndarray


def dense_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, each value's position among them): by counting where the values
    span a small range (stream and device ids), else by sorting."""
    if len(values) == 0:
        return values, np.zeros(0, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if high - low > (1 << 22):
        distinct, inverse = np.unique(values, return_inverse=True)
        return distinct, inverse.reshape(-1).astype(np.int64)
    present = np.bincount(values - low, minlength=high - low + 1) > 0
    code = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, code[values - low]


def stream_keys(device: np.ndarray, stream: np.ndarray) -> tuple[list[StreamKey], np.ndarray]:
    """The distinct (device, stream) pairs, sorted, and each row's position among them."""
    if len(device) == 0:
        return [], np.zeros(0, dtype=np.int64)
    streams, s_inv = dense_codes(stream)
    devices, d_inv = dense_codes(device)
    keys, inverse = dense_codes(d_inv * len(streams) + s_inv)
    pairs = [(int(devices[q // len(streams)]), int(streams[q % len(streams)])) for q in keys.tolist()]
    return pairs, inverse


def _distinct(rising: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array."""
    return rising[np.concatenate(([True], rising[1:] != rising[:-1]))] if len(rising) else rising


def groups(values: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(value, mask) for each distinct value; one comparison when all are equal (the usual case:
    kernels of one stream)."""
    if len(values) and (values == values[0]).all():
        return [(int(values[0]), np.ones(len(values), dtype=bool))]
    return [(int(v), values == v) for v in unique(values).tolist()]


@dataclass(frozen=True)
class Clock:
    """A sparse vector clock: clock columns (sorted) and, for each, the correlation id below which
    that stream's work happens before."""

    cols: np.ndarray
    values: np.ndarray

    def value(self, col: int) -> int:
        at = int(np.searchsorted(self.cols, col))
        return int(self.values[at]) if at < len(self.cols) and self.cols[at] == col else -1

    def with_entry(self, col: int, corr: int) -> Clock:
        at = int(np.searchsorted(self.cols, col))
        if at < len(self.cols) and self.cols[at] == col:
            values = self.values.copy()
            values[at] = max(int(values[at]), corr)
            return Clock(self.cols, values)
        return Clock(np.concatenate((self.cols[:at], [col], self.cols[at:])), np.concatenate((self.values[:at], [corr], self.values[at:])))


def merged(clocks: list[Clock]) -> Clock:
    """The entry-wise maximum of clocks, in one sort."""
    full = [c for c in clocks if len(c.cols)]
    if len(full) <= 1 or all(c is full[0] for c in full):
        return full[0] if full else NO_CLOCK
    cols, values = np.concatenate([c.cols for c in full]), np.concatenate([c.values for c in full])
    order = np.lexsort((values, cols))
    cols, values = cols[order], values[order]
    last = np.concatenate((cols[1:] != cols[:-1], [True]))
    return Clock(cols[last], values[last])


NO_CLOCK = Clock(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
# waits x recording streams up to which every wait's clock is computed in the one pass, as a dense
# row (few recording streams, many waits: the sparse clocks' Python per clock costs 10x more there)
DENSE_CLOCK_ENTRIES = 1 << 22


class _DenseClocks:
    """Every matched wait's clock as a row over the recording streams (-1: no entry), built in the
    correlation-order pass: a record's clock is its stream's current one with its own entry, a wait
    takes the entry-wise maximum with the record it matched."""

    def __init__(self, columns: int) -> None:
        self.none = np.full(columns, -1, dtype=np.int64)
        self.current: dict[int, np.ndarray] = {}  # stream -> its clock after its waits so far
        self.of_key: dict[int, np.ndarray] = {}  # event key -> the clock of its last record so far
        self.after: dict[int, list[np.ndarray]] = {}  # stream -> the clock after each of its matched waits

    def record(self, key: int, stream: int, col: int, corr: int) -> None:
        own = self.current.get(stream, self.none).copy()
        own[col] = max(int(own[col]), corr)
        self.of_key[key] = own

    def wait(self, stream: int, key: int) -> None:
        clock = np.maximum(self.current.get(stream, self.none), self.of_key[key])
        self.current[stream] = clock
        self.after.setdefault(stream, []).append(clock)

    def rows(self) -> dict[int, np.ndarray]:
        return {y: np.array(v, dtype=np.int64).reshape(len(v), len(self.none)) for y, v in self.after.items()}


@dataclass(frozen=True)
class WaitBlock:
    """The clocks after the waits on one stream that kernels follow: row[j] is wait j's row of
    values (-1: no kernel follows it), one column per entry of cols (clock columns)."""

    row: np.ndarray
    cols: np.ndarray
    values: np.ndarray


WaitPositions = list[tuple[int, np.ndarray, np.ndarray]]  # OrderingIndex.wait_positions


class OrderingIndex:
    def __init__(self, trace: Trace, launch_tid: np.ndarray, launch_start: np.ndarray) -> None:
        self.trace = trace
        self.launch_tid, self.launch_start = launch_tid, launch_start
        k = trace.kernels
        kernel_keys, inverse = stream_keys(k.device, k.stream)
        self.records = {r.key: r for r in trace.records}
        self.unmatched_queries = 0
        queries = self._query_syncs(set(kernel_keys))
        keys = set(kernel_keys) | {(r.device, r.stream) for r in trace.records}
        keys |= {(y.device, y.stream) for y in (*trace.syncs, *queries) if y.stream >= 0}
        self.streams: list[StreamKey] = sorted(keys)
        self.col = {key: i for i, key in enumerate(self.streams)}
        to_col = np.array([self.col[key] for key in kernel_keys], dtype=np.int64)
        self.kernel_col = to_col[inverse] if len(inverse) else inverse  # each kernel's stream, a position in streams
        self._build_clocks()
        self._host = sorted((y for y in (*trace.syncs, *queries) if y.kind in HOST_KINDS), key=lambda y: y.corr)
        self._host_corr = np.array([y.corr for y in self._host], dtype=np.int64)
        self._covers_cache: dict[int, HostCover] = {}

    def _query_syncs(self, kernel_keys: set[StreamKey]) -> list[Sync]:
        """Successful cudaEventQuery / cudaStreamQuery calls: the host saw the work complete, as an
        event or stream sync would have (PyTorch's allocator does this before reusing a block
        recorded with record_stream)."""
        memory = self.trace.memory
        if memory is None or len(memory.queries.corr) == 0:
            return []
        q = memory.queries
        by_corr = {r.corr: r for r in self.trace.records}
        devices: dict[int, list[int]] = {}
        for dev, stream in kernel_keys | {(r.device, r.stream) for r in self.trace.records}:
            devices.setdefault(stream, []).append(dev)
        out = []
        for corr, kind, rec_corr, stream, start, end, tid in zip(*(a.tolist() for a in (q.corr, q.kind, q.record_corr,
                                                                                    q.stream, q.start, q.end, q.tid))):
            rec: EventRecord | None = by_corr.get(rec_corr) if kind == QUERY_EVENT else None
            devs = devices.get(stream, []) if kind == QUERY_STREAM else []
            if rec is not None:
                out.append(Sync(kind=SyncKind.EVENT, device=rec.device, stream=-1, corr=corr, key=rec.key, start=start, end=end, tid=tid,
                                api="cudaEventQuery"))
            elif len(devs) == 1:
                out.append(Sync(kind=SyncKind.STREAM, device=devs[0], stream=stream, corr=corr, key=-1, start=start, end=end, tid=tid,
                                api="cudaStreamQuery"))
            else:
                self.unmatched_queries += 1
        return out

    # -- event edges -------------------------------------------------------------------------
    def _build_clocks(self) -> None:
        """One pass over records and waits in correlation order (a record sorts before a wait with
        the same id) links each wait to the record it matched; the vector clocks are then computed
        from those links only where they are read (sparse, `_clock_at`), so thousands of streams that
        record and wait cost what is asked of them, not streams x waits. A clock entry for stream x
        is only ever set by a record on x, so clock columns are the recording streams (`clock_col`;
        -1: none). The clocks of the waits a kernel follows (the last wait on its stream before it)
        are kept per stream as one dense block over the columns they use (`_block`)."""
        records = self.trace.records
        wait_syncs = [y for y in self.trace.syncs if y.kind is SyncKind.WAIT]
        self._r_col = [self.col[(r.device, r.stream)] for r in records]
        w_col = [self.col[(w.device, w.stream)] for w in wait_syncs]
        recording = sorted(set(self._r_col))
        self.clock_col = np.full(len(self.streams), -1, dtype=np.int64)
        self.clock_col[recording] = np.arange(len(recording))
        self.recording = np.array(recording, dtype=np.int64)  # clock column -> stream
        latest: dict[int, int] = {}  # event key -> the last record with it so far
        self._rec_waits: list[int] = [0] * len(records)  # matched waits on the record's stream before it
        self._wait_rec: dict[int, list[int]] = {}  # stream -> the record each of its matched waits took
        matched: dict[int, list[int]] = {}
        dense = _DenseClocks(len(recording)) if len(recording) * len(wait_syncs) <= DENSE_CLOCK_ENTRIES else None
        for _corr, what, i in sorted([(r.corr, 0, i) for i, r in enumerate(records)] + [(w.corr, 1, i) for i, w in enumerate(wait_syncs)]):
            if what == 0:
                latest[records[i].key] = i
                self._rec_waits[i] = len(matched.get(self._r_col[i], ()))
                if dense is not None:
                    dense.record(records[i].key, self._r_col[i], int(self.clock_col[self._r_col[i]]), records[i].corr)
            elif (r := latest.get(wait_syncs[i].key)) is not None:
                matched.setdefault(w_col[i], []).append(i)
                self._wait_rec.setdefault(w_col[i], []).append(r)
                if dense is not None:
                    dense.wait(w_col[i], wait_syncs[i].key)
        self._dense = dense.rows() if dense is not None else None
        self.unmatched_waits = len(wait_syncs) - sum(map(len, matched.values()))
        self.wait_corr = {y: np.array([wait_syncs[i].corr for i in v], dtype=np.int64) for y, v in matched.items()}
        self.wait_sync = {y: [wait_syncs[i] for i in v] for y, v in matched.items()}
        self.event_edges = sum(map(len, matched.values()))
        self._last_wait = self._kernels_last_wait()
        self._anchors = self._anchor_waits() if self._dense is None else {}  # read by the sparse clocks only
        self._memo: dict[tuple[int, int], Clock] = {}  # (0, record) or (1 + stream, wait) -> its clock
        blocks = {y: self._wait_block(y) for y in matched}
        self._block = {y: b for y, b in blocks.items() if b is not None}
        self._memo.clear()  # what the blocks hold; edges recompute the few clocks they read

    def _kernels_last_wait(self) -> dict[int, np.ndarray]:
        """Per stream with matched waits: for each of its kernels, the last matched wait before it (-1: none)."""
        k = self.trace.kernels
        order = np.lexsort((k.corr, self.kernel_col))
        bounds = np.searchsorted(self.kernel_col[order], np.arange(len(self.streams) + 1))
        return {y: np.searchsorted(w, k.corr[order[bounds[y]:bounds[y + 1]]]) - 1 for y, w in self.wait_corr.items()}

    def _anchor_waits(self) -> dict[int, np.ndarray]:
        """Per stream, the waits whose clocks are read (sorted): the last before one of its kernels
        (a kernel's event frontier) or before one of its records (the record's clock). Any other wait's
        clock is the previous anchor's merged with the records taken since, in one merge."""
        at: dict[int, list[int]] = {y: last[last >= 0].tolist() for y, last in self._last_wait.items()}
        for i, before in enumerate(self._rec_waits):
            if before:
                at.setdefault(self._r_col[i], []).append(before - 1)
        return {y: _distinct(np.sort(np.array(v, dtype=np.int64))) for y, v in at.items()}

    def _wait_block(self, y: int) -> WaitBlock | None:
        """The clocks after the waits on y that kernels on y follow, as one dense block (None: no
        kernel follows a wait on y)."""
        last = self._last_wait[y]  # rising, as the kernels are in correlation order
        used = last[last >= 0]
        used = _distinct(used)
        if len(used) == 0:
            return None
        row = np.full(len(self.wait_corr[y]), -1, dtype=np.int64)
        row[used] = np.arange(len(used))
        if self._dense is not None:
            rows = self._dense[y][used]
            cols = np.flatnonzero((rows >= 0).any(axis=0))
            return WaitBlock(row=row, cols=cols, values=np.ascontiguousarray(rows[:, cols]))
        clocks = [self._clock_at(y, j) for j in used.tolist()]
        if len(clocks) == 1:  # the usual case with many streams: the clock's own arrays, no copy
            return WaitBlock(row=row, cols=clocks[0].cols, values=clocks[0].values[None, :])
        cols = unique(np.concatenate([c.cols for c in clocks]))
        values = np.full((len(used), len(cols)), -1, dtype=np.int64)
        for r, c in enumerate(clocks):
            values[r, np.searchsorted(cols, c.cols)] = c.values
        return WaitBlock(row=row, cols=cols, values=values)

    def _clock_at(self, y: int, j: int) -> Clock:
        """The clock of stream y after its j-th matched wait, computing (iteratively, in dependency
        order) the clocks it is built from: the previous anchor wait on y and the records taken by
        the waits since, each record's clock being its stream's after the waits before it, with the
        record's own entry."""
        if self._dense is not None:
            full = self._dense[y][j]
            cols = np.flatnonzero(full >= 0)
            return Clock(cols, full[cols])
        stack = [(1 + y, j)]
        while stack:
            node = stack[-1]
            if node in self._memo:
                stack.pop()
                continue
            deps = self._deps(node)
            todo = [d for d in deps if d not in self._memo]
            if todo:
                stack += todo
                continue
            stack.pop()
            self._memo[node] = self._merge(node, [self._memo[d] for d in deps])
        return self._memo[(1 + y, j)]

    def _deps(self, node: tuple[int, int]) -> list[tuple[int, int]]:
        kind, i = node
        if kind == 0:  # a record: its stream's clock when it was submitted
            x, before = self._r_col[i], self._rec_waits[i]
            return [(1 + x, before - 1)] if before else []
        anchors = self._anchors.get(kind - 1, np.zeros(0, dtype=np.int64))
        at = int(np.searchsorted(anchors, i)) - 1  # the anchor before wait i
        prev = int(anchors[at]) if at >= 0 else -1
        taken = self._wait_rec[kind - 1][prev + 1:i + 1]
        return ([(kind, prev)] if prev >= 0 else []) + [(0, r) for r in dict.fromkeys(taken)]

    def _merge(self, node: tuple[int, int], parts: list[Clock]) -> Clock:
        kind, i = node
        if kind == 0:
            base = parts[0] if parts else NO_CLOCK
            return base.with_entry(int(self.clock_col[self._r_col[i]]), self.trace.records[i].corr)
        return merged(parts)

    def _event_value(self, x: int, y: int, j: int) -> int:
        """Stream x's entry in y's clock after its j-th matched wait (-1: none)."""
        return self._clock_at(y, j).value(int(self.clock_col[x]))

    def _event_edge(self, x: int, p_corr: int, y: int, c_corr: int) -> Edge | None:
        if y not in self.wait_corr or self.clock_col[x] < 0:
            return None
        hi = int(np.searchsorted(self.wait_corr[y], c_corr))  # waits on y submitted before the consumer
        if hi == 0 or self._event_value(x, y, hi - 1) <= p_corr:
            return None
        lo, top = 0, hi - 1  # the earliest wait that orders them: clocks only grow along y
        while lo < top:
            mid = (lo + top) // 2
            lo, top = (mid + 1, top) if self._event_value(x, y, mid) <= p_corr else (lo, mid)
        w = self.wait_sync[y][lo]
        rec = self.records[w.key]
        return Edge(kind=EdgeKind.EVENT, record_stream=rec.stream, record_corr=rec.corr, wait_stream=w.stream, wait_corr=w.corr, key=w.key, api=w.api)

    def wait_positions(self, c: np.ndarray) -> WaitPositions:
        """(stream y, mask of c on y, how many of y's matched waits precede each): what
        event_frontier searches for, shared by the calls for different x."""
        corr = self.trace.kernels.corr
        return [(y, m, np.searchsorted(self.wait_corr[y], corr[c[m]]) if y in self.wait_corr else np.zeros(int(m.sum()), dtype=np.int64))
                for y, m in groups(self.kernel_col[c])]

    def event_frontier(self, c: np.ndarray, x: int, at: WaitPositions | None = None) -> np.ndarray:
        """Per kernel c: the correlation id below which stream x's work is ordered before c by event
        edges (-1: none). at: wait_positions(c), when the caller has it."""
        out = np.full(len(c), -1, dtype=np.int64)
        cx = int(self.clock_col[x])
        if cx < 0:  # x never recorded an event: no event edge leaves it
            return out
        for y, m, hi in self.wait_positions(c) if at is None else at:
            block = self._block.get(y)
            if block is None:
                continue
            at_col = int(np.searchsorted(block.cols, cx))
            if at_col < len(block.cols) and block.cols[at_col] == cx:
                out[m] = np.where(hi > 0, block.values[block.row[np.maximum(hi - 1, 0)], at_col], -1)
        return out

    def event_rows(self, y: int, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For kernels c on stream y, event_frontier(c, x) for every x at once: the streams y's
        clocks name, the clocks after the waits kernels on y follow (one row each, -1: no entry), and
        each kernel's row (-1: no wait before it)."""
        block = self._block.get(y)
        if block is None or len(c) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.int64), np.full(len(c), -1, dtype=np.int64)
        hi = np.searchsorted(self.wait_corr[y], self.trace.kernels.corr[c])
        row: np.ndarray = np.where(hi > 0, block.row[np.maximum(hi - 1, 0)], -1)
        return self.recording[block.cols], block.values, row


    # -- host synchronisation ----------------------------------------------------------------
    def _host_edge(self, p: int, c: int) -> Edge | None:
        k = self.trace.kernels
        p_key = (int(k.device[p]), int(k.stream[p]))
        p_corr, c_corr = int(k.corr[p]), int(k.corr[c])
        lo = int(np.searchsorted(self._host_corr, p_corr, side="right"))
        hi = int(np.searchsorted(self._host_corr, c_corr))
        for y in self._host[lo:hi]:
            if not self._covers(y, p_key, p_corr):
                continue
            same_thread = y.tid >= 0 and y.tid == self.launch_tid[c]
            later = self.launch_start[c] >= 0 and self.launch_start[c] >= y.end
            if same_thread or later:
                return Edge(kind=EdgeKind.HOST_SYNC, wait_stream=y.stream if y.stream >= 0 else None, wait_corr=y.corr, api=y.api)
        return None

    def _covers(self, y: Sync, p_key: StreamKey, p_corr: int) -> bool:
        if y.kind is SyncKind.CONTEXT:  # a context is one process's work on the device
            return y.device == p_key[0] and process_index(y.corr) == process_index(p_key[1])
        if y.kind is SyncKind.STREAM:
            return (y.device, y.stream) == p_key
        rec = self.records.get(y.key)  # EVENT: the record must follow the producer on its stream
        return rec is not None and (rec.device, rec.stream) == p_key and rec.corr > p_corr

    def host_named(self) -> np.ndarray:
        """Per stream: a stream sync names it or an event sync names one of its records, so host
        syncs other than its context's may order its work (host_cover)."""
        named = np.zeros(len(self.streams), dtype=bool)
        for y in self._host:
            if y.kind is SyncKind.STREAM and (y.device, y.stream) in self.col:
                named[self.col[(y.device, y.stream)]] = True
            elif y.kind is SyncKind.EVENT and y.key in self.records:
                rec = self.records[y.key]
                named[self.col[(rec.device, rec.stream)]] = True
        return named

    def plain_streams(self) -> np.ndarray:
        """Per stream: it records no event and no stream or event sync names it, so nothing orders
        its work before another stream's except its context's synchronisations, the same for every
        plain stream of one (device, process)."""
        plain: np.ndarray = (self.clock_col < 0) & ~self.host_named()
        return plain

    def host_cover(self, x: int) -> HostCover:
        """The host syncs that cover stream x, with the correlation id each completes x up to
        (a stream or context sync: everything submitted before it; an event sync: the record)."""
        if x in self._covers_cache:
            return self._covers_cache[x]
        dev, stream = self.streams[x]
        rows = []
        for y in self._host:
            context = y.kind is SyncKind.CONTEXT and y.device == dev and process_index(y.corr) == process_index(stream)
            if context or y.kind is SyncKind.STREAM and (y.device, y.stream) == (dev, stream):
                rows.append((y.corr, y.corr, y.end, y.tid))
            elif y.kind is SyncKind.EVENT:
                rec = self.records.get(y.key)
                if rec is not None and (rec.device, rec.stream) == (dev, stream):
                    rows.append((min(rec.corr, y.corr), y.corr, y.end, y.tid))
        arr = np.array(rows, dtype=np.int64).reshape(len(rows), 4)
        cover = HostCover(*(np.ascontiguousarray(arr[:, i]) for i in range(4)))
        self._covers_cache[x] = cover
        return cover

    def host_frontier(self, c: np.ndarray, x: int) -> np.ndarray:
        """Per kernel c: the correlation id below which stream x's work is ordered before c by a host
        sync that returned before c was launched (on c's launching thread, or earlier in time)."""
        cov = self.host_cover(x)
        out = np.full(len(c), -1, dtype=np.int64)
        if len(cov.value) == 0:
            return out
        c_corr, ls, tid = self.trace.kernels.corr[c], self.launch_start[c], self.launch_tid[c]
        by_end = np.argsort(cov.end, kind="stable")
        end, value, corr = cov.end[by_end], np.maximum.accumulate(cov.value[by_end]), np.maximum.accumulate(cov.corr[by_end])
        j = np.searchsorted(end, ls, side="right") - 1
        timed = (ls >= 0) & (j >= 0)
        out = np.where(timed, value[np.maximum(j, 0)], -1)
        for t in unique(cov.tid[cov.tid >= 0]).tolist():  # the few threads that synchronised
            m = tid == t
            if not m.any():
                continue
            mine = np.nonzero(cov.tid == t)[0]
            mine = mine[np.argsort(cov.corr[mine], kind="stable")]
            best = np.maximum.accumulate(cov.value[mine])
            jt = np.searchsorted(cov.corr[mine], c_corr[m], side="left") - 1
            out[m] = np.maximum(out[m], np.where(jt >= 0, best[np.maximum(jt, 0)], -1))
        # a sync that ended before the launch but was submitted after it (clocks disagree with
        # correlation order) must not count: recompute those kernels exactly
        for i in np.nonzero(timed & (corr[np.maximum(j, 0)] >= c_corr))[0].tolist():
            ok = (cov.corr < c_corr[i]) & (((cov.tid >= 0) & (cov.tid == tid[i])) | (cov.end <= ls[i]))
            out[i] = int(cov.value[ok].max()) if ok.any() else -1
        return out

    # -- the queries -------------------------------------------------------------------------
    def order(self, p: int, c: int) -> Ordered:
        """How kernel p (producer) is ordered before kernel c (consumer)."""
        k = self.trace.kernels
        px, cy = (int(k.device[p]), int(k.stream[p])), (int(k.device[c]), int(k.stream[c]))
        p_corr, c_corr = int(k.corr[p]), int(k.corr[c])
        if px == cy and p_corr < c_corr:
            return Ordered(Verdict.SAME_STREAM, Edge(kind=EdgeKind.STREAM_ORDER))
        if px != cy:
            edge = self._event_edge(self.col[px], p_corr, self.col[cy], c_corr)
            if edge is not None:
                return Ordered(Verdict.EVENT_ORDERED, edge)
        edge = self._host_edge(p, c)
        if edge is not None:
            return Ordered(Verdict.HOST_SYNCHRONIZED, edge)
        return Ordered(Verdict.UNORDERED, None)

    def verdicts(self, p: np.ndarray, c: np.ndarray) -> np.ndarray:
        """The verdict code (position in VERDICTS) of each pair p[i] -> c[i], as order() decides it."""
        k = self.trace.kernels
        p_corr, c_corr = k.corr[p], k.corr[c]
        xs, ys = self.kernel_col[p], self.kernel_col[c]
        out = np.full(len(p), VERDICTS.index(Verdict.UNORDERED), dtype=np.int8)
        same = (xs == ys) & (p_corr < c_corr)
        out[same] = VERDICTS.index(Verdict.SAME_STREAM)
        for x, in_x in groups(xs):
            m = np.flatnonzero(in_x & ~same)
            cross = ys[m] != x
            event = cross & (p_corr[m] < self.event_frontier(c[m], x))
            host = ~event & (p_corr[m] < self.host_frontier(c[m], x))
            out[m[event]] = VERDICTS.index(Verdict.EVENT_ORDERED)
            out[m[host]] = VERDICTS.index(Verdict.HOST_SYNCHRONIZED)
        return out

    def frontier(self, c: np.ndarray, x: int, at: WaitPositions | None = None) -> np.ndarray:
        """Per kernel c: the correlation id below which stream x's work happens before c, by event
        edges or host syncs (a kernel on x below it is ordered before c)."""
        out: np.ndarray = np.maximum(self.event_frontier(c, x, at), self.host_frontier(c, x))
        return out
