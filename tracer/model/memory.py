"""The memory access sets of a trace as the model holds them (tracer.readers.memory_reader reads them from
the TRACER_* tables): frozen columnar records, no reading code, so the model can name them."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, kw_only=True)
class LaunchAccesses:
    """One row per (launch call, access of the op it was made in), sorted by the launch's correlation
    id; an op without accesses has one row with mode 0 (the kernel's set is known to be empty)."""

    corr: np.ndarray
    op_name: np.ndarray  # index into Trace.strings, -1 none
    address: np.ndarray
    size: np.ndarray
    mode: np.ndarray  # 1 read, 2 write, 3 both, 0 none
    exact: np.ndarray  # 0: direction or extent guessed ("may")
    allocation: np.ndarray  # TRACER_ALLOCATIONS.id, -1 unknown
    op: np.ndarray | None = None  # TRACER_OPS.id of the op the launch was made in


@dataclass(frozen=True)
class BackwardLaunches:
    """Launch calls made inside ops that autograd ran for a node (bwdSeqNr), sorted by correlation id."""

    corr: np.ndarray
    bwd_seq: np.ndarray
    start: np.ndarray  # the backward op's start


@dataclass(frozen=True)
class ForwardOps:
    """Ops that created an autograd node (seqNr), sorted by (seq, start)."""

    seq: np.ndarray
    tid: np.ndarray
    start: np.ndarray


@dataclass(frozen=True, kw_only=True)
class Allocations:
    id: np.ndarray  # sorted
    device: np.ndarray
    address: np.ndarray
    size: np.ndarray
    stream: np.ndarray
    start: np.ndarray
    end: np.ndarray  # -1: still live
    source: np.ndarray  # 1 torch storage, 2 cudaMalloc, 3 other
    label: np.ndarray  # index into Trace.strings, -1 none

    def row_of(self, ids: np.ndarray) -> np.ndarray:
        """The row of each allocation id, -1 where unknown."""
        if len(self.id) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        at = np.clip(np.searchsorted(self.id, ids), 0, len(self.id) - 1)
        return np.where((self.id[at] == ids) & (ids >= 0), at, -1)


@dataclass(frozen=True, kw_only=True)
class HostQueries:
    """cudaEventQuery / cudaStreamQuery calls that returned cudaSuccess: the host saw completion."""

    corr: np.ndarray
    kind: np.ndarray
    record_corr: np.ndarray  # event query: the cudaEventRecord it saw complete
    stream: np.ndarray  # stream query: the stream
    start: np.ndarray
    end: np.ndarray
    tid: np.ndarray


@dataclass(frozen=True)
class LaunchUnknown:
    corr: np.ndarray
    name: np.ndarray
    reason: tuple[str, ...]


@dataclass(frozen=True)
class GraphNodes:
    """CUDA graph nodes (sorted) and the correlation id of the launch that made each at capture,
    following clones to their original (-1: no traced launch made it)."""

    node: np.ndarray
    corr: np.ndarray
    original: np.ndarray | None = None  # the node instantiation cloned it from (itself if no clone): edges name those

    def originals(self, nodes: np.ndarray) -> np.ndarray:
        """Each node's original (the node as captured; graph edges name those), -1 where unknown."""
        if len(self.node) == 0 or self.original is None:
            return np.full(len(nodes), -1, dtype=np.int64)
        at = np.clip(np.searchsorted(self.node, nodes), 0, len(self.node) - 1)
        return np.where(self.node[at] == nodes, self.original[at], -1)


@dataclass(frozen=True)
class GraphLaunches:
    """cudaGraphLaunch calls and the stream each was launched into (sorted by correlation id), and
    the edges of the graphs instantiated (original node ids: from -> to)."""

    corr: np.ndarray
    stream: np.ndarray
    edge_from: np.ndarray
    edge_to: np.ndarray


def no_graph_launches() -> GraphLaunches:
    e = np.zeros(0, dtype=np.int64)
    return GraphLaunches(e, e, e, e)


@dataclass(frozen=True, kw_only=True)
class CaptureWindow:
    """Where memory sets were recorded (`trace run --memory-steps/--memory-range`): `what` says the
    window ("" : the whole run); operations launched outside every [start, end] have none."""

    what: str = ""
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def whole_run(self) -> bool:
        return not self.what

    def outside(self, t: np.ndarray) -> np.ndarray:
        """Per time: inside no window (always False for the whole run)."""
        if self.whole_run:
            return np.zeros(len(t), dtype=bool)
        order = np.argsort(self.start, kind="stable")
        s, e = self.start[order], self.end[order]
        at = np.searchsorted(s, t, side="right") - 1
        return ~((at >= 0) & (e[np.maximum(at, 0)] >= t)) if len(s) else np.ones(len(t), dtype=bool)


@dataclass(frozen=True, kw_only=True)
class Memory:
    recorded: bool  # access sets were captured (TRACER_MEMORY=1 or the tables are there)
    launches: LaunchAccesses
    backward: BackwardLaunches
    forward: ForwardOps
    allocations: Allocations
    queries: HostQueries
    unknown: LaunchUnknown
    graph_nodes: GraphNodes
    graphs: GraphLaunches = field(default_factory=no_graph_launches)
    window: CaptureWindow = field(default_factory=CaptureWindow)


@dataclass(frozen=True)
class KernelAccesses:
    """Each kernel's accesses as rows (kernel, row of Memory.launches); kernels of one op share its set."""

    kernel: np.ndarray
    row: np.ndarray
    kernels_with_memory: np.ndarray  # bool per kernel: its launch belongs to an op
