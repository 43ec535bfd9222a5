"""What a capture collects, one NamedTuple per record kind (plain tuples with the same field order
are accepted too: scripts/make_synthetic_trace.py builds them by position). Times are CUPTI
timestamps (ns, the activity records' clock); thread ids are system thread ids."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class KernelRec(NamedTuple):
    start: int
    end: int
    device_id: int
    context_id: int
    stream_id: int
    correlation_id: int
    name: str  # mangled, as CUPTI reports it
    grid_x: int
    grid_y: int
    grid_z: int
    block_x: int
    block_y: int
    block_z: int
    registers_per_thread: int
    static_shared_memory: int
    dynamic_shared_memory: int
    graph_id: int
    graph_node_id: int


class ApiRec(NamedTuple):
    start: int
    end: int
    driver: int  # 1 driver API, 0 runtime API
    thread_id: int
    correlation_id: int
    name: str
    return_value: int


class SyncRec(NamedTuple):
    start: int
    end: int
    context_id: int
    stream_id: int
    correlation_id: int
    sync_type: int
    event_id: int
    event_sync_id: int


class EventRec(NamedTuple):
    timestamp: int
    device_id: int
    context_id: int
    stream_id: int
    correlation_id: int
    event_id: int
    event_sync_id: int


class StreamRec(NamedTuple):
    context_id: int
    stream_id: int
    priority: int
    flag: int
    correlation_id: int


class MemcpyRec(NamedTuple):
    start: int
    end: int
    device_id: int
    context_id: int
    stream_id: int
    correlation_id: int
    bytes: int
    copy_kind: int
    src_kind: int
    dst_kind: int
    graph_node_id: int = 0  # a copy node of a graph launch


class MemsetRec(NamedTuple):
    start: int
    end: int
    device_id: int
    context_id: int
    stream_id: int
    correlation_id: int
    value: int
    bytes: int
    graph_node_id: int = 0


class MarkerRec(NamedTuple):
    flags: int  # CUPTI marker flags: 1 instantaneous, 2 start, 4 end
    timestamp: int
    id: int
    thread_id: int
    name: str
    domain: str


# Memory access sets (docs/design/capture-memory-jobs.md), written as the TRACER_* tables.

class OpKind:
    TORCH = 1  # a PyTorch dispatcher op (TorchDispatchMode)
    TRACER = 2  # tracer's own cuda.core launch: pointers and directions known
    LAUNCH_ARGS = 3  # any other launch: pointer-sized arguments matched against live allocations
    COPY_ARGS = 4  # a copy or memset API call outside any op: its own arguments (src, dst, bytes, pitches)


class Mode:
    READ = 1
    WRITE = 2
    READ_WRITE = 3


class AllocSource:
    TORCH = 1
    CUDA_MALLOC = 2
    OTHER = 3


class HostQueryKind:
    EVENT = 1
    STREAM = 2


class OpRec(NamedTuple):
    id: int  # the external correlation id pushed around the op
    kind: int  # OpKind
    name: str
    thread_id: int
    start: int
    end: int
    seq_nr: int  # forward op: sequence number of the autograd node it created, else -1
    bwd_seq_nr: int  # op run by autograd for the node with this sequence number, else -1
    correlation_id: int | None  # kind 3: the launch API call
    callsite: str | None  # first user frame file:line


class AccessRec(NamedTuple):
    op_id: int
    address: int
    bytes: int
    mode: int  # Mode
    exact: int  # 1 from a schema or tracer's launcher; 0 guessed (direction or extent)
    allocation_id: int  # -1 unknown
    label: str | None  # argument name, "out N", "arg N"


class AllocationRec(NamedTuple):
    id: int
    device_id: int
    address: int
    bytes: int
    stream_id: int  # -1 unknown
    start: int
    end: int  # -1 still live at the end of the capture
    source: int  # AllocSource
    label: str | None


class ExtCorrRec(NamedTuple):
    correlation_id: int
    external_id: int


class HostQueryRec(NamedTuple):
    correlation_id: int
    kind: int  # HostQueryKind
    record_correlation_id: int  # event query: the cudaEventRecord it saw complete, else -1
    stream_id: int  # stream query: CUPTI stream id, else -1
    start: int
    end: int
    thread_id: int


class LaunchUnknownRec(NamedTuple):
    correlation_id: int
    name: str
    reason: str


class GraphNodeRec(NamedTuple):
    """A CUDA graph node: made by a kernel launch into a stream being captured (that launch's
    correlation id), or cloned from another node when a graph is instantiated or cloned."""

    node_id: int  # CUPTI's graph node id (the graphNodeId of the kernels a graph launch runs)
    correlation_id: int  # -1: not made by a launch
    original_node_id: int  # -1: not a clone


class Memory2Rec(NamedTuple):
    """A CUPTI MEMORY2 record (cudaMalloc/cudaFree and module statics)."""

    operation: int  # 1 allocation, 2 release
    address: int
    bytes: int
    device_id: int
    stream_id: int  # 4294967295: no stream (synchronous cudaMalloc)
    memory_kind: int
    timestamp: int
    correlation_id: int
    name: str


@dataclass(kw_only=True)
class TraceRecords:
    """What a capture collected (tuple layouts: tracer/capture/records.py). The memory lists are
    written as the TRACER_* tables only when `memory` is set."""

    pid: int
    kernels: list[KernelRec] = field(default_factory=list)
    apis: list[ApiRec] = field(default_factory=list)
    syncs: list[SyncRec] = field(default_factory=list)
    events: list[EventRec] = field(default_factory=list)
    streams: list[StreamRec] = field(default_factory=list)
    memcpys: list[MemcpyRec] = field(default_factory=list)
    memsets: list[MemsetRec] = field(default_factory=list)
    markers: list[MarkerRec] = field(default_factory=list)
    errors: dict[str, tuple[int, str]] = field(default_factory=dict)  # record type -> (count, first error)
    memory: bool = False
    ops: list[OpRec] = field(default_factory=list)
    accesses: list[AccessRec] = field(default_factory=list)
    allocations: list[AllocationRec] = field(default_factory=list)
    ext_correlations: list[ExtCorrRec] = field(default_factory=list)
    host_queries: list[HostQueryRec] = field(default_factory=list)
    launch_unknown: list[LaunchUnknownRec] = field(default_factory=list)
    graph_nodes: list[GraphNodeRec] = field(default_factory=list)
    graph_launches: list[tuple[int, int]] = field(default_factory=list)  # (cuGraphLaunch correlation id, stream id)
    graph_edges: list[tuple[int, int]] = field(default_factory=list)  # (from node id, to node id); (n, n): n's graph was read
    memory_windows: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of each capture window (--memory-steps)
    meta: dict[str, str] = field(default_factory=dict)  # extra META_DATA_EXPORT rows (capture counters)

    def take(self) -> TraceRecords:
        """The streamed records gathered since the last take (moved out: this object keeps none of
        them); the memory lists stay, they are resolved and written at the end."""
        batch = TraceRecords(pid=self.pid)
        for name in STREAMED:
            setattr(batch, name, getattr(self, name))
            setattr(self, name, [])
        return batch


# Written to the trace file as they arrive (periodic flushes); the rest only at the end.
STREAMED = ("kernels", "apis", "syncs", "events", "streams", "memcpys", "memsets", "markers")


def count_error(errors: dict[str, tuple[int, str]], where: str, exc: BaseException) -> None:
    """Failures are counted into the trace's metadata with the first message, never raised into
    the traced program."""
    count, first = errors.get(where, (0, f"{type(exc).__name__}: {exc}"[:300]))
    errors[where] = (count + 1, first)
