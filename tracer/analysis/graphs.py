"""CUDA graph launches as stream operations. CUPTI gives every operation of one graph launch the
launch's correlation id and its graph node, but puts the operations of parallel branches on streams
of their own (seen on the H200: a graph captured across two streams, replayed on one), which would
make sequential replays look unordered. Here each launch's operations move to the stream the launch
was made on (recorded by `--memory` captures; otherwise the stream of the launch's first operation),
so a launch is ordered after what precedes it on that stream and before what follows, like a
kernel. Operations of one launch are then never compared with each other by stream order: a launch
whose operations CUPTI spread over several streams had parallel branches, and its internal pairs
are judged only against the graph's own edges (hazards.graph_internal), else counted as not judged.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from tracer.format.memory_tables import WRITE
from tracer.model.arrays import unique
from tracer.model.trace import Trace

if TYPE_CHECKING:  # start-up: the memory model is imported only for traces that have memory tables (issue 27)
    from tracer.model.memory import Memory

MAX_JUDGED_OPS = 2048  # operations of one branched graph launch judged against each other (pairwise, once per graph)


@dataclass(frozen=True, kw_only=True)
class GraphReplays:
    launches: int = 0
    operations: int = 0
    branched: int = 0  # launches whose operations CUPTI put on more than one stream
    stream_recorded: int = 0  # launches whose stream the capture recorded (others: their first operation's)

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Launches:
    """The operations replayed from graphs, grouped by launch (CSR: ops[offset[i]:offset[i+1]], by start)."""

    ops: np.ndarray
    offset: np.ndarray
    branched: np.ndarray  # per launch


def launches(trace: Trace) -> Launches:
    k = trace.kernels
    if k.graph_node is None:
        e = np.zeros(0, dtype=np.int64)
        return Launches(e, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=bool))
    ops = np.flatnonzero(k.graph_node > 0)
    ops = ops[np.lexsort((k.start[ops], k.corr[ops], k.device[ops]))]
    dev, corr = k.device[ops], k.corr[ops]
    head = np.flatnonzero(np.r_[True, (dev[1:] != dev[:-1]) | (corr[1:] != corr[:-1])]) if len(ops) else ops
    offset = np.r_[head, len(ops)].astype(np.int64)
    stream = k.stream[ops]
    several = (np.minimum.reduceat(stream, head) != np.maximum.reduceat(stream, head)) if len(ops) else np.zeros(0, dtype=bool)
    return Launches(ops, offset, several)


def on_launch_streams(trace: Trace) -> tuple[Trace, GraphReplays, Launches]:
    """The trace with each graph launch's operations on its launch stream, what was done, and the launches."""
    found = launches(trace)
    n = len(found.offset) - 1
    if n == 0:
        return trace, GraphReplays(), found
    k = trace.kernels
    head = found.ops[found.offset[:-1]]
    stream = k.stream[head].copy()
    recorded = np.zeros(n, dtype=bool)
    g = trace.memory.graphs if trace.memory is not None else None
    if g is not None and len(g.corr):
        at = np.clip(np.searchsorted(g.corr, k.corr[head]), 0, len(g.corr) - 1)
        recorded = g.corr[at] == k.corr[head]
        stream = np.where(recorded, g.stream[at], stream)
    moved = k.stream.copy()
    moved[found.ops] = np.repeat(stream, np.diff(found.offset))
    info = GraphReplays(launches=n, operations=len(found.ops), branched=int(found.branched.sum()),
                        stream_recorded=int(recorded.sum()))
    return replace(trace, kernels=replace(k, stream=moved)), info, found


@dataclass(frozen=True, kw_only=True)
class InternalPairs:
    """Conflicting, unordered pairs of operations inside graph launches (rows of the trace's
    operations, with the access rows of Memory.launches that overlap), and which launches were judged."""

    producer: np.ndarray
    consumer: np.ndarray
    producer_row: np.ndarray
    consumer_row: np.ndarray
    judged: np.ndarray  # per launch of Launches: its edges were recorded, its internal pairs judged


def internal_pairs(trace: Trace, found: Launches, memory: Memory) -> InternalPairs:
    """The branched launches whose every operation's node belongs to a graph whose edges the capture
    read: each pair of their operations with no path between their nodes, whose accesses overlap with
    a write, is a hazard of that launch. Pairs are worked out once per distinct launch structure."""
    k, g = trace.kernels, memory.graphs
    member = unique(g.edge_from[g.edge_from == g.edge_to])
    adjacency: dict[int, list[int]] = {}
    for a, b in zip(g.edge_from.tolist(), g.edge_to.tolist()):
        if a != b:
            adjacency.setdefault(a, []).append(b)
    reach_cache: dict[int, set[int]] = {}
    judged = np.zeros(len(found.branched), dtype=bool)
    out: list[tuple[int, int, int, int]] = []
    structures: dict[tuple[int, ...], list[tuple[int, int, int, int]]] = {}
    for n in np.flatnonzero(found.branched).tolist():
        ops = found.ops[found.offset[n]:found.offset[n + 1]]
        if len(ops) > MAX_JUDGED_OPS:  # pairs are compared one by one: a bigger launch stays not judged
            continue
        assert k.graph_node is not None  # branched launches exist only where kernels carry graph nodes
        nodes = memory.graph_nodes.originals(k.graph_node[ops])
        if (nodes < 0).any() or not np.isin(nodes, member).all():
            continue
        judged[n] = True
        key = tuple(nodes.tolist())
        if key not in structures:
            structures[key] = _unordered_conflicts(trace, ops, nodes, memory, adjacency, reach_cache)
        out += [(int(ops[i]), int(ops[j]), ri, rj) for i, j, ri, rj in structures[key]]
    cols = np.array(out, dtype=np.int64).reshape(len(out), 4)
    return InternalPairs(producer=cols[:, 0], consumer=cols[:, 1], producer_row=cols[:, 2], consumer_row=cols[:, 3], judged=judged)


def _reach(node: int, adjacency: dict[int, list[int]], cache: dict[int, set[int]]) -> set[int]:
    if node not in cache:
        seen, todo = set(), [node]
        while todo:
            for nxt in adjacency.get(todo.pop(), []):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        cache[node] = seen
    return cache[node]


def _unordered_conflicts(trace: Trace, ops: np.ndarray, nodes: np.ndarray, memory: Memory, adjacency: dict[int, list[int]],
                         cache: dict[int, set[int]]) -> list[tuple[int, int, int, int]]:
    """(position i, position j, access row of i, access row of j) in one launch: no path between
    their nodes, overlapping bytes, one writing; i is the operation that started first."""
    from tracer.readers.memory_reader import access_corr, kernel_accesses  # start-up: only traces with memory tables get here (issue 27)

    graph_node = trace.kernels.graph_node
    assert graph_node is not None  # only launches with graph nodes get here (graph_internal_pairs)
    ka = kernel_accesses(memory, access_corr(memory, replace(trace.kernels, corr=trace.kernels.corr[ops],
                                                             graph_node=graph_node[ops])))
    la = memory.launches
    rows: dict[int, list[int]] = {}
    for op, row in zip(ka.kernel.tolist(), ka.row.tolist()):
        rows.setdefault(op, []).append(row)
    start = trace.kernels.start[ops]
    op_of = la.op if la.op is not None else np.arange(len(la.corr))
    out, seen = [], set()
    for i in range(len(ops)):
        for j in range(i + 1, len(ops)):
            a, b = (i, j) if start[i] <= start[j] else (j, i)
            if nodes[b] in _reach(int(nodes[a]), adjacency, cache) or nodes[a] in _reach(int(nodes[b]), adjacency, cache):
                continue
            for ra in rows.get(a, []):
                for rb in rows.get(b, []):
                    overlap = la.address[ra] < la.address[rb] + la.size[rb] and la.address[rb] < la.address[ra] + la.size[ra]
                    ops_pair = (int(op_of[ra]), int(op_of[rb]))
                    if overlap and (la.mode[ra] | la.mode[rb]) & WRITE and ops_pair not in seen:
                        seen.add(ops_pair)  # once per pair of ops: an op's memset and kernel share its accesses
                        out.append((a, b, ra, rb))
    return out
