"""The trace model every reader produces: columnar numpy arrays in frozen dataclasses.

Times are integer nanoseconds. Correlation ids order the work a process submits: within one
stream, submission order is correlation order, whatever the host clocks say.

Streams, correlation ids and event keys belong to a process (a CUDA context): two processes both
have a stream 7 and a correlation id 12. Readers make them trace-unique: the process's index
among the trace's processes (0 for the first or only one) goes above PROCESS_SHIFT
(`key = index << PROCESS_SHIFT | raw`), so a trace of one process keeps its raw ids. The model's
`stream` arrays and fields, `corr` and event `key` hold such keys; `Trace.streams` maps each stream
key back to (pid, device, raw stream id) for what is shown.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from tracer.model.memory import Memory

Record = TypeVar("Record", bound="DataclassInstance")


def from_columns(cls: type[Record], columns: Sequence[Any]) -> Record:
    """A columnar record from its columns in field order (records of more than 4 fields take keywords only)."""
    return cls(**{f.name: column for f, column in zip(fields(cls), columns)})


class SyncKind(str, Enum):
    STREAM = "stream"  # cudaStreamSynchronize: the host waits for one stream
    EVENT = "event"  # cudaEventSynchronize: the host waits for one event record
    CONTEXT = "context"  # cudaDeviceSynchronize / cuCtxSynchronize: the host waits for everything
    WAIT = "wait"  # cudaStreamWaitEvent: a stream waits for an event record (a device-side edge)
    UNKNOWN = "unknown"


PROCESS_SHIFT = 40  # raw CUPTI stream, correlation and event-sync ids are 32-bit


def process_index(key: int | np.ndarray) -> int | np.ndarray:
    """The process part of a stream key, correlation id or event key (0 in a one-process trace)."""
    return key >> PROCESS_SHIFT


def raw_id(key: int) -> int:
    """The id the process itself used (stream, correlation or event id); negative ids are kept."""
    return key & ((1 << PROCESS_SHIFT) - 1) if key >= 0 else key


@dataclass(frozen=True)
class StreamOrigin:
    """Where a stream key comes from: the process (-1: unknown), device and raw stream id."""

    pid: int
    device: int
    stream: int
class OpKind(str, Enum):
    """What a GPU operation of the model is (Kernels.op holds positions in OP_KINDS)."""

    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"


OP_KINDS = tuple(OpKind)
KERNEL, MEMCPY, MEMSET = range(3)
# CUPTI_ACTIVITY_MEMCPY_KIND: the direction a copy record names
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP"}
COPY_KIND_CODES = {v: k for k, v in COPY_KINDS.items()}


@dataclass(frozen=True, kw_only=True)
class Kernels:
    """GPU operations: kernels, and once with_operations() merged them, copies and memsets."""

    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    name: np.ndarray  # index into Trace.strings
    graph_node: np.ndarray | None = None  # CUDA graph node a graph launch ran it from (0: none); None: not read
    op: np.ndarray | None = None  # position in OP_KINDS per row; None: kernels only

    def __len__(self) -> int:
        return len(self.start)

    def kinds(self) -> np.ndarray:
        return self.op if self.op is not None else np.zeros(len(self.start), dtype=np.int64)


@dataclass(frozen=True, kw_only=True)
class Transfers:
    """Copies and memsets as the trace recorded them (CUPTI MEMCPY / MEMSET records, Kineto
    gpu_memcpy / gpu_memset events), sorted by start."""

    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    op: np.ndarray  # MEMCPY or MEMSET
    copy_kind: np.ndarray  # CUPTI memcpy kind (COPY_KINDS), 0 for memsets and unknown
    bytes: np.ndarray
    graph_node: np.ndarray  # 0: not from a graph

    def __len__(self) -> int:
        return len(self.start)

    def label(self, i: int) -> str:
        if int(self.op[i]) == MEMSET:
            return "[memset]"
        return f"[memcpy {COPY_KINDS.get(int(self.copy_kind[i]), 'unknown')}]"


@dataclass(frozen=True, kw_only=True)
class Apis:
    """Runtime and driver API calls (launches, records, waits, syncs), by correlation id."""

    start: np.ndarray
    end: np.ndarray
    tid: np.ndarray
    corr: np.ndarray  # sorted
    name: np.ndarray  # index into Trace.strings

    def index_of(self, corr: np.ndarray) -> np.ndarray:
        """The row of each correlation id, -1 where no API record has it."""
        if len(self.corr) == 0:
            return np.full(len(corr), -1, dtype=np.int64)
        idx = np.clip(np.searchsorted(self.corr, corr), 0, len(self.corr) - 1)
        return np.where(self.corr[idx] == corr, idx, -1)


@dataclass(frozen=True)
class EventRecord:
    """cudaEventRecord on a stream; `key` is what waits and syncs name it by (eventSyncId in nsys,
    the record's correlation id in Kineto)."""

    device: int
    stream: int
    corr: int
    key: int


@dataclass(frozen=True, kw_only=True)
class Sync:
    kind: SyncKind
    device: int
    stream: int  # the waiting stream (WAIT) or the synchronised stream (STREAM); -1 otherwise
    corr: int
    key: int  # the event record's key (WAIT, EVENT); -1 otherwise
    start: int
    end: int
    tid: int  # the host thread (-1 unknown)
    api: str


@dataclass(frozen=True)
class Ranges:
    """NVTX (or profiler annotation) ranges; end == -1 for a range never closed."""

    start: np.ndarray
    end: np.ndarray
    tid: np.ndarray
    text: np.ndarray  # index into Trace.strings


@dataclass(frozen=True, kw_only=True)
class Trace:
    source: str
    producer: str
    strings: list[str]
    kernels: Kernels
    apis: Apis
    ranges: Ranges
    records: tuple[EventRecord, ...]
    syncs: tuple[Sync, ...]
    memcpy_count: int = 0
    memset_count: int = 0
    meta: dict[str, str] = field(default_factory=dict)
    record_errors: dict[str, tuple[int, str]] = field(default_factory=dict)  # record type -> (lost, first error); -1 unknown
    memory: Memory | None = None  # memory access sets (tracer captures with --memory)
    streams: dict[int, StreamOrigin] = field(default_factory=dict)  # stream key -> origin; absent keys are raw ids
    processes: tuple[int, ...] = ()  # pids by process index ((): one process, pid unknown)
    transfers: Transfers | None = None  # copies and memsets; None: the reader does not read them

    def kernel_name(self, i: int) -> str:
        return self.strings[int(self.kernels.name[i])]

    @property
    def multi_process(self) -> bool:
        return len(self.processes) > 1

    def stream_origin(self, key: int) -> StreamOrigin:
        known = self.streams.get(key)
        if known is not None:
            return known
        pid = self.processes[int(process_index(key))] if key >= 0 and process_index(key) < len(self.processes) else -1
        return StreamOrigin(pid, -1, raw_id(key))

    def stream_label(self, key: int) -> str:
        """`stream 7`, or `pid 1234 stream 7` when the trace holds several processes."""
        o = self.stream_origin(int(key))
        return f"pid {o.pid} stream {o.stream}" if self.multi_process else f"stream {o.stream}"


def empty_transfers() -> Transfers:
    e = np.zeros(0, dtype=np.int64)
    return Transfers(start=e, end=e, device=e, stream=e, corr=e, op=e, copy_kind=e, bytes=e, graph_node=e)


def with_operations(trace: Trace) -> Trace:
    """The trace whose `kernels` are every GPU operation: kernels, copies and memsets in one set of
    columns sorted by start (kernels first on ties), `op` saying which is which. Analysis runs on
    this: stream order, happens-before, pairs, hazards and views see copies as they see kernels."""
    k, x = trace.kernels, trace.transfers
    if k.op is not None:
        return trace
    if x is None or len(x) == 0:
        return replace(trace, kernels=replace(k, op=np.zeros(len(k), dtype=np.int64)))
    strings = list(trace.strings)
    code = np.where(x.op == MEMSET, -1, x.copy_kind)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    names = len(strings) + inverse.reshape(-1).astype(np.int64)
    strings += [x.label(int(i)) for i in first.tolist()]
    nodes = None
    if k.graph_node is not None:
        nodes = np.concatenate([k.graph_node, x.graph_node])
    cols = [np.concatenate([a, b]) for a, b in ((k.start, x.start), (k.end, x.end), (k.device, x.device),
                                                (k.stream, x.stream), (k.corr, x.corr), (k.name, names))]
    op = np.concatenate([np.zeros(len(k), dtype=np.int64), x.op])
    order = np.argsort(cols[0], kind="stable")
    merged = from_columns(Kernels, [*(c[order] for c in cols), nodes[order] if nodes is not None else None, op[order]])
    return replace(trace, strings=strings, kernels=merged)


def empty_ints() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


def expand_ranges(lo: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The concatenation of arange(lo[i], lo[i] + n[i]) for all i, without a Python loop."""
    total = int(n.sum())
    if total == 0:
        return empty_ints()
    return np.repeat(lo - np.cumsum(n) + n, n) + np.arange(total, dtype=np.int64)


def lex_search(keys: tuple[np.ndarray, np.ndarray], query: tuple[np.ndarray, np.ndarray], side: str = "left") -> np.ndarray:
    """searchsorted over pairs (a, b) sorted lexicographically: on one int64 key a * span + b where
    that cannot overflow (query b clipped to just outside the keys' range, which compares the same),
    else on a structured array (slower)."""
    a, b = keys
    qa, qb = query
    if len(a) == 0 or len(qa) == 0:
        return np.zeros(len(qa), dtype=np.int64)
    bmin, bmax = int(b.min()), int(b.max())
    amin, amax = min(int(a.min()), int(qa.min())), max(int(a.max()), int(qa.max()))
    span = bmax - bmin + 3
    if (amax - amin + 1) * span < (1 << 62):
        key = (a - amin) * span + (b - bmin + 1)
        q = (qa - amin) * span + (np.clip(qb, bmin - 1, bmax + 1) - bmin + 1)
        return np.searchsorted(key, q, side=side)  # type: ignore[call-overload,no-any-return]  # side: a str, the stubs want a Literal
    dt = np.dtype([("a", np.int64), ("b", np.int64)])
    k, q2 = np.empty(len(a), dtype=dt), np.empty(len(qa), dtype=dt)
    k["a"], k["b"], q2["a"], q2["b"] = a, b, qa, qb
    return np.searchsorted(k, q2, side=side)  # type: ignore[call-overload,no-any-return]  # side: a str, the stubs want a Literal
