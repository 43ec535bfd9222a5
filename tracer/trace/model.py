"""The trace model every reader produces: columnar numpy arrays in frozen dataclasses.

Times are integer nanoseconds. Correlation ids order the work a process submits: within one
stream, submission order is correlation order, whatever the host clocks say.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from tracer.trace.memory import Memory

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


@dataclass(frozen=True, kw_only=True)
class Kernels:
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    name: np.ndarray  # index into Trace.strings
    graph_node: np.ndarray | None = None  # CUDA graph node a graph launch ran it from (0: none); None: not read

    def __len__(self) -> int:
        return len(self.start)


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

    def kernel_name(self, i: int) -> str:
        return self.strings[int(self.kernels.name[i])]


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
