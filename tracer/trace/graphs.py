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

import numpy as np

from tracer.trace.model import Trace


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
