"""The trace model every reader produces: columnar numpy arrays in frozen dataclasses.

Times are integer nanoseconds. Correlation ids order the work a process submits: within one
stream, submission order is correlation order, whatever the host clocks say.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np


class SyncKind(str, Enum):
    STREAM = "stream"  # cudaStreamSynchronize: the host waits for one stream
    EVENT = "event"  # cudaEventSynchronize: the host waits for one event record
    CONTEXT = "context"  # cudaDeviceSynchronize / cuCtxSynchronize: the host waits for everything
    WAIT = "wait"  # cudaStreamWaitEvent: a stream waits for an event record (a device-side edge)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Kernels:
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    name: np.ndarray  # index into Trace.strings

    def __len__(self) -> int:
        return len(self.start)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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

    def kernel_name(self, i: int) -> str:
        return self.strings[int(self.kernels.name[i])]


def empty_ints() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)
