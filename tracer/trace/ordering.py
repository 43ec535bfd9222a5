"""Happens-before between kernels: stream order, event record -> stream wait edges, and host
synchronisations.

Within a stream, work runs in submission order, which is correlation-id order. An event record
on stream X at correlation r, waited on by stream Y at correlation w, orders everything submitted
to X before r ahead of everything submitted to Y after w. Vector clocks over the records and waits
(processed in correlation order, since a record is always submitted before the waits naming it)
make each query a binary search, transitive chains included.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from tracer.trace.model import EventRecord, Sync, SyncKind, Trace

StreamKey = tuple[int, int]  # (device, stream)


class Verdict(str, Enum):
    SAME_STREAM = "same-stream"
    EVENT_ORDERED = "event-ordered"
    HOST_SYNCHRONIZED = "host-synchronized"
    UNORDERED = "unordered"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {v: i for i, v in enumerate(Verdict)}


@dataclass(frozen=True)
class Edge:
    """The evidence that orders a pair."""

    kind: str  # "stream-order", "event", "host-sync"
    record_stream: int | None = None
    record_corr: int | None = None
    wait_stream: int | None = None
    wait_corr: int | None = None
    key: int | None = None
    api: str | None = None

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Ordered:
    verdict: Verdict
    edge: Edge | None


class OrderingIndex:
    def __init__(self, trace: Trace, launch_tid: np.ndarray, launch_start: np.ndarray) -> None:
        self.trace = trace
        self.launch_tid, self.launch_start = launch_tid, launch_start
        keys = {(int(d), int(s)) for d, s in zip(trace.kernels.device, trace.kernels.stream)}
        keys |= {(r.device, r.stream) for r in trace.records} | {(y.device, y.stream) for y in trace.syncs if y.stream >= 0}
        self.streams: list[StreamKey] = sorted(keys)
        self.col = {k: i for i, k in enumerate(self.streams)}
        self.records = {r.key: r for r in trace.records}
        self.unmatched_waits = 0
        self._build_clocks()
        self._host = sorted((y for y in trace.syncs if y.kind in (SyncKind.STREAM, SyncKind.EVENT, SyncKind.CONTEXT)),
                            key=lambda y: y.corr)
        self._host_corr = np.array([y.corr for y in self._host], dtype=np.int64)

    # -- event edges -------------------------------------------------------------------------
    def _build_clocks(self) -> None:
        n = len(self.streams)
        cur = np.full((n, n), -1, dtype=np.int64)  # cur[y][x]: x's work before this corr is done before y continues
        rec_clock: dict[int, np.ndarray] = {}
        waits: dict[int, list[tuple[int, np.ndarray, Sync]]] = {i: [] for i in range(n)}
        ops: list[tuple[int, int, object]] = [(r.corr, 0, r) for r in self.trace.records]
        ops += [(y.corr, 1, y) for y in self.trace.syncs if y.kind is SyncKind.WAIT]
        for _, what, op in sorted(ops, key=lambda o: (o[0], o[1])):
            if what == 0:
                r: EventRecord = op  # type: ignore[assignment]
                x = self.col[(r.device, r.stream)]
                clock = cur[x].copy()
                clock[x] = max(clock[x], r.corr)
                rec_clock[r.key] = clock
            else:
                w: Sync = op  # type: ignore[assignment]
                clock = rec_clock.get(w.key)
                if clock is None:
                    self.unmatched_waits += 1
                    continue
                y = self.col[(w.device, w.stream)]
                cur[y] = np.maximum(cur[y], clock)
                waits[y].append((w.corr, cur[y].copy(), w))
        self.wait_corr = {y: np.array([c for c, _, _ in v], dtype=np.int64) for y, v in waits.items()}
        self.wait_clock = {y: (np.stack([c for _, c, _ in v]) if v else np.zeros((0, n), dtype=np.int64)) for y, v in waits.items()}
        self.wait_sync = {y: [w for _, _, w in v] for y, v in waits.items()}
        self.event_edges = sum(len(v) for v in waits.values())

    def _event_edge(self, x: int, p_corr: int, y: int, c_corr: int) -> Edge | None:
        corrs = self.wait_corr[y]
        hi = int(np.searchsorted(corrs, c_corr))  # waits on y submitted before the consumer
        if hi == 0 or self.wait_clock[y][hi - 1][x] <= p_corr:
            return None
        first = int(np.argmax(self.wait_clock[y][:hi, x] > p_corr))  # the earliest wait that orders them
        w = self.wait_sync[y][first]
        rec = self.records[w.key]
        return Edge("event", rec.stream, rec.corr, w.stream, w.corr, w.key, w.api)

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
                return Edge("host-sync", wait_stream=y.stream if y.stream >= 0 else None, wait_corr=y.corr, api=y.api)
        return None

    def _covers(self, y: Sync, p_key: StreamKey, p_corr: int) -> bool:
        if y.kind is SyncKind.CONTEXT:
            return y.device == p_key[0]
        if y.kind is SyncKind.STREAM:
            return (y.device, y.stream) == p_key
        rec = self.records.get(y.key)  # EVENT: the record must follow the producer on its stream
        return rec is not None and (rec.device, rec.stream) == p_key and rec.corr > p_corr

    # -- the query ---------------------------------------------------------------------------
    def order(self, p: int, c: int) -> Ordered:
        """How kernel p (producer) is ordered before kernel c (consumer)."""
        k = self.trace.kernels
        px, cy = (int(k.device[p]), int(k.stream[p])), (int(k.device[c]), int(k.stream[c]))
        p_corr, c_corr = int(k.corr[p]), int(k.corr[c])
        if px == cy and p_corr < c_corr:
            return Ordered(Verdict.SAME_STREAM, Edge("stream-order"))
        if px != cy:
            edge = self._event_edge(self.col[px], p_corr, self.col[cy], c_corr)
            if edge is not None:
                return Ordered(Verdict.EVENT_ORDERED, edge)
        edge = self._host_edge(p, c)
        if edge is not None:
            return Ordered(Verdict.HOST_SYNCHRONIZED, edge)
        return Ordered(Verdict.UNORDERED, None)
