"""Memory access sets of one traced process (`trace run --memory`): the bookkeeping behind the
TRACER_* tables (docs/design/capture-memory-jobs.md).

Three producers feed it: the TorchDispatchMode (torch_mode.py: kind 1 ops, exact accesses from
op schemas), tracer's own launcher (tracer/kernel/launch.py: kind 2, exact), and the CUPTI launch
callbacks (callbacks.py: kind 3, pointer-sized launch arguments, resolved at the end against the
allocations live at launch time: direction unknown, so read+write and exact=0). Hot paths append
tuples; labels are formatted and allocations resolved once, at `finish`. No torch or CUPTI import
here: the recorder is driven through plain functions (clock, push, pop)."""
from __future__ import annotations

import bisect
import itertools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from tracer.capture.records import (AccessRec, AllocationRec, AllocSource, GraphNodeRec, HostQueryRec, LaunchUnknownRec,
                                    Memory2Rec, Mode, OpKind, OpRec, TraceRecords, count_error)
from tracer.capture.window import MemoryWindow, WindowSpec

NO_STREAM = 4294967295  # MEMORY2's stream id for synchronous cudaMalloc
DEVICE_MEMORY_KINDS = frozenset({2, 3, 5})  # pinned host, device, managed (module statics are left out)
MIN_POINTER = 1 << 16  # launch-argument words below this are counts and flags, never device addresses
NEIGHBOURS = 32  # allocation bases looked at left of an interior pointer


class _Tls(threading.local):
    depth = 0  # > 0 inside a recorded op or tracer launch: CUPTI launch callbacks skip the launch
    launch = 0  # correlation id of the launch call this thread is inside (0: none)
    tid = 0
    last_seq = -1


class PendingAccess(NamedTuple):
    """An exact access whose allocation is looked up at finish (tracer's launcher)."""

    op_id: int
    address: int
    bytes: int
    mode: int
    label: str
    time: int
    exact: int = 1


class LaunchWords(NamedTuple):
    """A kind 3 launch: the pointer-sized words of its arguments, matched at finish."""

    op_id: int
    time: int
    words: tuple[int, ...]


class Allocation:
    """A torch storage instance (mutable until its free is seen)."""

    __slots__ = ("id", "device", "address", "bytes", "start", "end", "impl", "label")

    def __init__(self, id: int, device: int, address: int, nbytes: int, start: int, impl: int, label: tuple) -> None:
        self.id, self.device, self.address, self.bytes = id, device, address, nbytes
        self.start, self.end, self.impl, self.label = start, -1, impl, label

    def row(self) -> AllocationRec:
        return AllocationRec(self.id, self.device, self.address, self.bytes, -1, self.start, self.end, AllocSource.TORCH,
                             format_label(self.label))


def format_label(parts: tuple) -> str:
    """("aten::mm", "out 0", "train.py:12") -> "aten::mm out 0 at train.py:12"."""
    op, role, where = parts
    return f"{op} {role}" + (f" at {where}" if where else "")


class MemoryRecorder:
    def __init__(self, clock: Callable[[], int], push: Callable[[int], object], pop: Callable[[], object],
                 *, devices: Iterable[str] = ("cuda",), window: WindowSpec | None = None) -> None:
        self.clock, self.push, self.pop = clock, push, pop
        self.devices = frozenset(devices)
        self.window = MemoryWindow(window or WindowSpec(), lambda: self.clock())  # open: memory sets are recorded
        self.tls = _Tls()
        self.ids = itertools.count(1)  # external correlation ids = TRACER_OPS.id
        self.alloc_ids = itertools.count(1)
        self.ops: list[OpRec] = []
        self.accesses: list[AccessRec] = []
        self.pending: list[PendingAccess] = []
        self.launches: list[LaunchWords] = []
        self.allocations: list[Allocation] = []
        self.live: dict[int, Allocation] = {}  # storage base address -> live instance
        self.alloc_seen: dict[int, int] = {}  # address -> time of the allocator's allocation callback
        self.frees_seen = False  # the allocator reports frees (torch's GPU trace hooks): instances end exactly
        self.host_queries: dict[int, HostQueryRec] = {}
        self.event_records: dict[int, int] = {}  # event handle -> correlation id of its last record
        self.launch_unknown: list[LaunchUnknownRec] = []
        self.graph_nodes: list[GraphNodeRec] = []
        self.graph_launches: list[tuple[int, int]] = []
        self.edges: list[tuple[int, int]] = []
        self.errors: dict[str, tuple[int, str]] = {}
        self.counters: Counter[str] = Counter()
        self.mode: object = None  # the TorchDispatchMode, once torch is imported

    # --- shared helpers -------------------------------------------------------------------
    def bind(self, clock: Callable[[], int], push: Callable[[int], object], pop: Callable[[], object]) -> None:
        """The backend's clock and external-id calls, once CUPTI has started."""
        self.clock, self.push, self.pop = clock, push, pop

    def thread_id(self) -> int:
        tid = self.tls.tid
        if not tid:
            tid = self.tls.tid = threading.get_native_id()
        return tid

    def count_error(self, where: str, exc: BaseException) -> None:
        count_error(self.errors, where, exc)

    def reset_after_fork(self) -> None:
        """The child keeps nothing of its parent's (ids restart too: they are per process)."""
        keep = (self.tls, self.mode, self.frees_seen, self.window)
        self.__init__(self.clock, self.push, self.pop, devices=self.devices)  # type: ignore[misc]  # re-running __init__ resets every field in one place after fork
        self.tls, self.mode, self.frees_seen, self.window = keep  # the entered mode holds this thread-local, the NVTX hooks the window

    # --- ops --------------------------------------------------------------------------------
    def begin(self) -> tuple[int, int]:
        """Open an op: its id is pushed as the external correlation id of the calls made inside."""
        oid = next(self.ids)
        self.tls.depth += 1
        self.push(oid)
        return oid, self.clock()

    def end(self) -> int:
        t1 = self.clock()
        self.pop()
        self.tls.depth -= 1
        return t1

    @contextmanager
    def tracer_launch(self, name: str, accesses: Iterable[tuple[int, int, int, str]]) -> Iterator[int]:
        """tracer's own launch (kind 2): accesses (address, bytes, mode, label) are exact."""
        if not self.window.open:
            yield 0
            return
        oid, t0 = self.begin()
        try:
            yield oid
        finally:
            t1 = self.end()
        self.ops.append(OpRec(oid, OpKind.TRACER, name, self.thread_id(), t0, t1, -1, -1, None, None))
        self.pending.extend(PendingAccess(oid, a, n, m, label, t0) for a, n, m, label in accesses if n > 0)

    def launch_args(self, correlation_id: int, name: str, words: Iterable[int]) -> int:
        """A launch outside any op (kind 3): its candidate pointers, resolved at finish."""
        oid, now = next(self.ids), self.clock()
        self.ops.append(OpRec(oid, OpKind.LAUNCH_ARGS, name, self.thread_id(), now, now, -1, -1, correlation_id, None))
        kept = tuple(sorted({w for w in words if w >= MIN_POINTER}))
        if kept:
            self.launches.append(LaunchWords(oid, now, kept))
        return oid

    def copy_args(self, correlation_id: int, name: str, accesses: Iterable[tuple[int, int, int, int, str]]) -> int:
        """A copy or memset API call outside any op (kind 4): (address, bytes, mode, exact, label)
        from its own arguments, their allocations looked up at finish."""
        oid, now = next(self.ids), self.clock()
        self.ops.append(OpRec(oid, OpKind.COPY_ARGS, name, self.thread_id(), now, now, -1, -1, correlation_id, None))
        self.pending.extend(PendingAccess(oid, a, n, m, label, now, exact) for a, n, m, exact, label in accesses if n > 0)
        return oid

    def graph_launch(self, correlation_id: int, stream_id: int) -> None:
        self.graph_launches.append((correlation_id, stream_id))

    def graph_edges(self, edges: list[tuple[int, int]]) -> None:
        self.edges.extend(edges)

    def unknown_launch(self, correlation_id: int, name: str, reason: str) -> None:
        self.launch_unknown.append(LaunchUnknownRec(correlation_id, name, reason))

    def graph_node(self, node_id: int, correlation_id: int, original_node_id: int) -> None:
        """A CUDA graph node made by a launch into a capturing stream, or a clone of another node:
        the kernels a graph launch replays get the access set of the launch that made their node."""
        self.graph_nodes.append(GraphNodeRec(node_id, correlation_id, original_node_id))

    # --- torch storages ---------------------------------------------------------------------
    def instance(self, base: int, impl: int, nbytes: int, device: int, now: int, label: tuple) -> int:
        """The allocation instance of a storage: a new one after the allocator freed (or handed
        out again) its block; without free reports, a new StorageImpl over the same base."""
        a = self.live.get(base)
        if a is not None and not self.frees_seen and a.impl != impl:
            a.end = now
            a = None
        if a is None:
            a = Allocation(next(self.alloc_ids), device, base, nbytes, self.alloc_seen.pop(base, now), impl, label)
            self.allocations.append(a)
            self.live[base] = a
        elif nbytes > a.bytes:  # resized in place
            a.bytes = nbytes
        return a.id

    def on_alloc(self, address: int) -> None:
        """torch's caching allocator handed out a block at address."""
        now = self.clock()
        old = self.live.pop(address, None)
        if old is not None:  # its free was missed
            old.end = now
        self.alloc_seen[address] = now

    def on_free(self, address: int) -> None:
        a = self.live.pop(address, None)
        if a is not None:
            a.end = self.clock()
        self.alloc_seen.pop(address, None)

    # --- host queries -----------------------------------------------------------------------
    def event_recorded(self, event: int, correlation_id: int) -> None:
        self.event_records[event] = correlation_id

    def query_done(self, q: HostQueryRec) -> None:
        old = self.host_queries.get(q.correlation_id)
        self.host_queries[q.correlation_id] = q._replace(start=old.start) if old is not None else q

    # --- the end ----------------------------------------------------------------------------
    def finish(self, rec: TraceRecords, memory2: list[Memory2Rec]) -> None:
        """Resolve pending and launch-argument accesses against the allocations and fill rec."""
        segments = segment_rows(memory2, self.alloc_ids)
        index = AllocationIndex([a.row() for a in self.allocations], segments)
        accesses = list(self.accesses)
        for p in self.pending:
            found = index.find(p.address, p.time)
            inside = found is not None and p.address + p.bytes <= found.address + found.bytes  # else it crosses into the next
            accesses.append(AccessRec(p.op_id, p.address, p.bytes, p.mode, p.exact, found.id if found is not None and inside else -1,
                                      p.label))
        for launch in self.launches:
            accesses.extend(launch_accesses(launch, index))
        rec.memory = True
        rec.ops = list(self.ops)
        rec.accesses = accesses
        rec.allocations = [a.row() for a in self.allocations] + segments
        rec.host_queries = sorted(self.host_queries.values(), key=lambda q: q.start)
        rec.launch_unknown = list(self.launch_unknown)
        rec.graph_nodes = list(self.graph_nodes)
        rec.graph_launches = [(c, s) for c, s in self.graph_launches if s >= 0]
        rec.graph_edges = list(self.edges)
        if not self.window.spec.whole_run:
            rec.memory_windows = self.window.finish()
            rec.meta["TRACER_MEMORY_WINDOW"] = self.window.spec.describe()
        for where, (n, first) in self.errors.items():
            rec.errors[f"memory_{where}"] = (n, first)
        rec.meta.update({f"TRACER_MEMORY_{k.upper()}": str(v) for k, v in sorted(self.counters.items())})
        rec.meta["TRACER_MEMORY_FREES"] = "allocator" if self.frees_seen else "storage identity"


def launch_accesses(launch: LaunchWords, index: AllocationIndex) -> list[AccessRec]:
    """Each word inside an allocation live at launch time: read and write, from the pointer to
    the end of that allocation, exact=0 (the kernel's use of it is unknown)."""
    out: dict[int, AccessRec] = {}
    for i, w in enumerate(launch.words):
        found = index.find(w, launch.time)
        if found is not None and w not in out:
            out[w] = AccessRec(launch.op_id, w, found.address + found.bytes - w, Mode.READ_WRITE, 0, found.id, f"word {i}")
    return list(out.values())


def segment_rows(memory2: list[Memory2Rec], ids: Iterator[int]) -> list[AllocationRec]:
    """cudaMalloc/cudaFree (MEMORY2) as allocation instances, each release ending the live one."""
    live: dict[int, int] = {}
    rows: list[AllocationRec] = []
    for m in sorted(memory2, key=lambda r: r.timestamp):
        if m.memory_kind not in DEVICE_MEMORY_KINDS:
            continue
        if m.operation == 1:
            stream = -1 if m.stream_id == NO_STREAM else m.stream_id
            live[m.address] = len(rows)
            rows.append(AllocationRec(next(ids), m.device_id, m.address, m.bytes, stream, m.timestamp, -1,
                                      AllocSource.CUDA_MALLOC, m.name or "cudaMalloc"))
        elif m.operation == 2 and m.address in live:
            i = live.pop(m.address)
            rows[i] = rows[i]._replace(end=m.timestamp)
    return rows


class AllocationIndex:
    """Which allocation holds an address at a time: torch instances first (finer), then
    cudaMalloc segments. Bases sorted once; an interior pointer looks at a few bases left of it."""

    def __init__(self, torch_rows: list[AllocationRec], segments: list[AllocationRec]) -> None:
        self.levels = [self._group(torch_rows), self._group(segments)]

    @staticmethod
    def _group(rows: list[AllocationRec]) -> tuple[list[int], dict[int, list[AllocationRec]]]:
        by_base: dict[int, list[AllocationRec]] = {}
        for r in rows:
            by_base.setdefault(r.address, []).append(r)
        return sorted(by_base), by_base

    def find(self, address: int, time: int) -> AllocationRec | None:
        for bases, by_base in self.levels:
            i = bisect.bisect_right(bases, address)
            for j in range(i - 1, max(-1, i - 1 - NEIGHBOURS), -1):
                for r in by_base[bases[j]]:
                    if r.address <= address < r.address + r.bytes and r.start <= time and (r.end == -1 or time < r.end):
                        return r
        return None
