"""Cross-stream memory hazards (docs/design/capture-memory-jobs.md): pairs of kernels on different
streams of one process and device whose byte ranges overlap, at least one writing, with no
happens-before edge either way.

How it stays linear: accesses are grouped into address components (per device, the connected runs
of overlapping byte ranges; accesses in different components cannot overlap). For a consumer access
b on stream t and another stream s, the accesses on s submitted before b and not ordered before it
are those with a correlation id in [F, b) where F is b's frontier on s (made monotone along t:
whatever is ordered before an earlier kernel on t is ordered before b too). Within b's component
that is one contiguous window of s's accesses sorted by (component, correlation id), found by
binary search; only the pairs inside windows have their bytes compared. An access submitted before
b can never be ordered after it, so each unordered pair is found once, from its later access.
"""
from __future__ import annotations

import ast
import fnmatch
import os
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from tracer.analysis.attribution import Attribution
from tracer.analysis.graphs import InternalPairs, Launches, internal_pairs
from tracer.format.memory_tables import READ, WRITE
from tracer.model.arrays import unique
from tracer.model.trace import KERNEL, MEMCPY, MEMSET, Trace, expand_ranges
from tracer.model.names import ellipsize, text_name
from tracer.analysis.ordering import OrderingIndex, WaitPositions

if TYPE_CHECKING:  # start-up: the memory model is imported only for traces that have memory tables (issue 27)
    from tracer.model.memory import CaptureWindow, Memory

MAX_LISTED_HAZARDS = 200
NO_FRONTIER = np.iinfo(np.int64).min
NO_MEMORY_NOTE = "hazards: the trace has no memory access sets (capture with `trace run --memory`); not checked"
NSYS_NOTE = ("hazards: an Nsight Systems capture has no memory access sets, so no hazard can be judged from it "
             "(ordering only); capture with `trace run --backend cupti --memory`; not checked")


class Covered(str, Enum):
    """The kinds of GPU operation the hazard check accounts for, each seen and judged or not."""

    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    COLLECTIVE = "collective"  # NCCL kernels
    GRAPH_INTERNAL = "graph-internal"  # operations of one CUDA graph launch, against each other
    UNDECODED = "undecoded-launch"  # launches whose arguments could not be read (also among the kernels)
    OUTSIDE_WINDOW = "outside-window"  # launched outside the memory capture window (--memory-steps/--memory-range)


COLLECTIVE_PREFIX = "nccl"
COLLECTIVE_OP_PREFIX = "c10d::"  # ... or launched inside a c10d op
WHY_NOT = {
    Covered.KERNEL: "no memory access set (launched outside any recorded op, arguments not read)",
    Covered.MEMCPY: "no memory access set (no torch op issued them and no copy API arguments were recorded, or a side "
                    "is a CUDA array: opaque layout, not linear memory)",
    Covered.MEMSET: "no memory access set (no torch op issued them and no memset API arguments were recorded)",
    Covered.COLLECTIVE: "no memory access set (no c10d op launched them)",
    Covered.GRAPH_INTERNAL: "CUPTI ran them on more than one stream (parallel branches) and the graph's edges were "
                            "not recorded (or the launch has more than 2,048 operations), so they are not judged "
                            "against each other",
    Covered.UNDECODED: "launch arguments could not be read",
    Covered.OUTSIDE_WINDOW: "launched outside the memory capture window ({window}), traced as plain CUPTI",
}


@dataclass(frozen=True, kw_only=True)
class Coverage:
    """How many operations of one kind the hazard check saw, judged, and left unjudged where it matters
    (a device with more than one stream; any graph launch with parallel branches)."""

    kind: Covered
    seen: int
    judged: int
    unjudged: int
    window: str = ""  # OUTSIDE_WINDOW: the capture window, as the capture named it
    missed: int = 0  # OUTSIDE_WINDOW: NVTX ranges the window's glob names that never opened it

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind.value, "seen": self.seen, "judged": self.judged, "unjudged": self.unjudged}
        return out | ({"window": self.window} if self.window else {}) | ({"missed_ranges": self.missed} if self.missed else {})

    def line(self) -> str:
        why = WHY_NOT[self.kind].format(window=self.window)
        missed = (f"; {self.missed} NVTX range(s) the window names never opened it (pushed through an NVTX API the "
                  "capture could not read): what ran in them is not judged") if self.missed else ""
        return f"not judged: {self.unjudged} of {self.seen} {self.kind.value} operation(s): {why}{missed}; hazards unknown for them"


def joined_coverage(parts: list[tuple[Coverage, ...]]) -> tuple[Coverage, ...]:
    """The coverage of several processes' hazard checks as one (a job's, in a diff): counts added per kind."""
    total: dict[Covered, list[int]] = {}
    windows: dict[Covered, str] = {}
    for part in parts:
        for c in part:
            t = total.setdefault(c.kind, [0, 0, 0])
            t[0], t[1], t[2] = t[0] + c.seen, t[1] + c.judged, t[2] + c.unjudged
            if c.window and c.window not in windows.get(c.kind, ""):
                windows[c.kind] = f"{windows[c.kind]}; {c.window}" if c.kind in windows else c.window
    return tuple(Coverage(kind=k, seen=s, judged=j, unjudged=u, window=windows.get(k, "")) for k, (s, j, u) in total.items())


class HazardKind(str, Enum):
    RAW = "RAW"  # the producer writes, the consumer reads
    WAR = "WAR"  # the producer reads, the consumer writes
    WAW = "WAW"
    REUSE = "reuse"  # different allocation instances over the same bytes: memory freed and reused


KINDS = tuple(HazardKind)


@dataclass(frozen=True, kw_only=True)
class KernelRef:
    kernel: str
    range: str
    rule: str
    stream: int
    corr: int
    op: str | None
    start_ns: int
    end_ns: int
    index: int = -1  # in trace.kernels; not in the JSON

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "index"}


@dataclass(frozen=True)
class AllocationRef:
    id: int
    label: str | None
    bytes: int
    stream: int

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True, kw_only=True)
class Hazard:
    kind: HazardKind
    may: bool  # a direction or extent was guessed
    gap_ns: int  # consumer start - producer end; negative: they ran at the same time
    producer: KernelRef
    consumer: KernelRef
    address: int  # the first overlapping byte range found
    bytes: int
    allocation: AllocationRef | None  # the consumer's allocation
    previous_allocation: AllocationRef | None  # reuse: the producer's (freed) allocation

    @property
    def producer_index(self) -> int:
        return self.producer.index

    @property
    def consumer_index(self) -> int:
        return self.consumer.index

    def to_json(self) -> dict[str, object]:
        memory: dict[str, object] = {"address": self.address, "bytes": self.bytes,
                                     "allocation": self.allocation.to_json() if self.allocation else None}
        if self.previous_allocation is not None:
            memory["previous_allocation"] = self.previous_allocation.to_json()
        return {"kind": self.kind.value, "may": self.may, "gap_ns": self.gap_ns, "producer": self.producer.to_json(),
                "consumer": self.consumer.to_json(), "memory": memory}


@dataclass(frozen=True, kw_only=True)
class Hazards:
    memory: bool
    kernels_with_memory: int = 0
    kernels_without_memory: int = 0
    unjudged: int = 0  # kernels without a memory set on a device with more than one stream
    launch_unknown: tuple[tuple[str, int, str], ...] = ()  # (kernel, count, reason)
    counts: tuple[tuple[str, int], ...] = ()
    listed: tuple[Hazard, ...] = ()
    host_queries: int = 0
    unmatched_queries: int = 0
    graph_kernels: tuple[int, int] = (0, 0)  # kernels replayed from CUDA graphs, and those of them without a memory set
    note: str = NO_MEMORY_NOTE  # why not, without memory sets
    coverage: tuple[Coverage, ...] = ()

    @property
    def not_judged(self) -> tuple[Coverage, ...]:
        return tuple(c for c in self.coverage if c.unjudged or c.missed)

    def covered(self) -> str:
        """What the count covers, e.g. 'judged 12 of 14 GPU operations (kernel 10/10, memcpy 1/3, memset 1/1)'."""
        ops = [c for c in self.coverage if c.kind in (Covered.KERNEL, Covered.COLLECTIVE, Covered.MEMCPY, Covered.MEMSET)]
        seen, judged = sum(c.seen for c in ops), sum(c.judged for c in ops)
        parts = ", ".join(f"{c.kind.value} {c.judged}/{c.seen}" for c in ops if c.seen)
        window = next((c.window for c in self.coverage if c.kind is Covered.OUTSIDE_WINDOW), "")
        return f"judged {judged} of {seen} GPU operations ({parts or 'none'})" + (f"; memory sets recorded in {window} only" if window else "")

    @property
    def found(self) -> int:
        c = dict(self.counts)
        return sum(c.get(k.value, 0) for k in KINDS)

    def to_json(self) -> dict[str, object]:
        if not self.memory:
            return {"memory": False, "note": self.note}
        return {"memory": True, "kernels_with_memory": self.kernels_with_memory,
                "kernels_without_memory": self.kernels_without_memory, "unjudged_kernels": self.unjudged,
                "launch_unknown": [{"kernel": k, "count": n, "reason": r} for k, n, r in self.launch_unknown],
                "host_queries": self.host_queries, "unmatched_host_queries": self.unmatched_queries,
                "graph_kernels": {"replayed": self.graph_kernels[0], "without_memory": self.graph_kernels[1]},
                "coverage": [c.to_json() for c in self.coverage], "covered": self.covered(),
                "not_judged": [c.line() for c in self.not_judged],
                "counts": dict(self.counts), "listed": [h.to_json() for h in self.listed]}

    def failures(self) -> list[str]:
        if not self.memory:
            return [f"hazards cannot be checked: {self.note.removeprefix('hazards: ').removesuffix('; not checked')}"]
        out = [f"{self.found} cross-stream memory hazard(s)"] if self.found else []
        out += [c.line() for c in self.not_judged if c.kind is not Covered.UNDECODED]
        if self.unjudged and not self.coverage:
            out.append(f"{self.unjudged} kernel(s) on multi-stream devices have no memory access set: hazards unknown for them")
        return out

    def _graph_note(self) -> str:
        unknown = self.graph_kernels[1]
        return (f" ({unknown} kernel(s) replayed from CUDA graphs have none: no traced launch made their nodes, as in "
                "graphs built node by node or captured before tracing started)") if unknown else ""

    def text_lines(self, shown: int = 20) -> list[str]:
        if not self.memory:
            return [self.note]
        c = dict(self.counts)
        lines = [f"hazards: {self.found} ({', '.join(f'{k} {v}' for k, v in c.items())}); {self.covered()}"]
        lines += [f"warning: {c.line()}" + (self._graph_note() if c.kind is Covered.KERNEL else "") for c in self.not_judged]
        if self.graph_kernels[0]:
            lines.append(f"note: {self.graph_kernels[0]} operation(s) replayed from CUDA graphs, judged with the ops "
                         "recorded at capture, each graph launch ordered on its launch stream")
        lines += [f"  launch arguments unknown: {k} x{n} ({r})" for k, n, r in self.launch_unknown[:10]]
        for h in self.listed[:shown]:
            may = " (may)" if h.may else ""
            lines.append(f"  {h.kind.value}{may:<6} {ellipsize(h.producer.range, 60)} [{text_name(h.producer.kernel)}, "
                         f"s{h.producer.stream}] -> {ellipsize(h.consumer.range, 60)} [{text_name(h.consumer.kernel)}, "
                         f"s{h.consumer.stream}] {h.bytes} B at {h.address:#x}, "
                         f"gap {h.gap_ns / 1e3:.1f} us")
        if len(self.listed) > shown:
            lines.append(f"  ... {self.found - shown} more (--json lists up to {MAX_LISTED_HAZARDS})")
        return lines


@dataclass(frozen=True, kw_only=True)
class AccessRows:
    """One row per (kernel, access) of the kernels with memory sets, with what the search needs."""

    kernel: np.ndarray
    row: np.ndarray  # row of Memory.launches
    col: np.ndarray  # the kernel's stream (a position in OrderingIndex.streams)
    corr: np.ndarray
    address: np.ndarray
    end: np.ndarray  # address + bytes
    mode: np.ndarray
    comp: np.ndarray  # address component: rows in different components cannot overlap


def access_rows(trace: Trace, index: OrderingIndex, memory: Memory) -> tuple[AccessRows, np.ndarray]:
    """The access rows that could conflict (non-empty ranges in components touched from more than one
    stream, one of them writing) and, per kernel, whether it has a memory set."""
    from tracer.readers.memory_reader import access_corr, kernel_accesses  # start-up: only traces with memory tables get here (issue 27)

    ka = kernel_accesses(memory, access_corr(memory, trace.kernels))
    la = memory.launches
    keep = la.size[ka.row] > 0
    kern, row = ka.kernel[keep], ka.row[keep]
    address, end = la.address[row], la.address[row] + la.size[row]
    col, mode = index.kernel_col[kern], la.mode[row]
    comp, order = _components(address, end, trace.kernels.device[kern])
    live = _shared(comp[order], col[order], mode[order])[comp] if len(comp) else np.zeros(0, dtype=bool)
    rows = AccessRows(kernel=kern[live], row=row[live], col=col[live], corr=trace.kernels.corr[kern[live]], address=address[live], end=end[live],
                      mode=mode[live], comp=comp[live])
    return rows, ka.kernels_with_memory


def _components(address: np.ndarray, end: np.ndarray, device: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each range's address component (per device, the connected runs of overlapping ranges:
    [a, b) and [b, c) do not overlap), numbered in address order, and that order."""
    order = np.lexsort((address, device))
    reach = _running_max(end[order], device[order])
    new = np.r_[True, (device[order][1:] != device[order][:-1]) | (address[order][1:] >= reach[:-1])] if len(order) else order
    comp = np.empty(len(order), dtype=np.int64)
    comp[order] = np.cumsum(new) - 1
    return comp, order


def _shared(comp: np.ndarray, col: np.ndarray, mode: np.ndarray) -> np.ndarray:
    """Per component (rows given in component order): touched from more than one stream, one writing."""
    heads = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1]])
    several = np.minimum.reduceat(col, heads) != np.maximum.reduceat(col, heads)
    out: np.ndarray = several & np.maximum.reduceat((mode & WRITE) > 0, heads)
    return out


def _running_max(end: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Running maximum of end, restarting at each device (rows sorted by device)."""
    if len(end) == 0:
        return end
    starts = np.flatnonzero(np.r_[True, device[1:] != device[:-1]])
    out = np.empty_like(end)
    for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(end)]):
        out[a:b] = np.maximum.accumulate(end[a:b])
    return out


@dataclass
class _Found:
    producer: list[np.ndarray]
    consumer: list[np.ndarray]
    ordered_p: list[np.ndarray]
    ordered_c: list[np.ndarray]


class _Keys:
    """(component, correlation id) as one sortable int64: component * width + the id's offset from
    the smallest id (or its rank among the rows' ids where that could overflow)."""

    def __init__(self, rows: AccessRows) -> None:
        low = int(rows.corr.min()) if len(rows.corr) else 0
        high = int(rows.corr.max()) if len(rows.corr) else 0
        comps = int(rows.comp.max()) + 1 if len(rows.comp) else 1
        self.ids = None if comps * (high - low + 3) < (1 << 62) else unique(rows.corr)
        self.low, self.high = low, high
        self.width = high - low + 3 if self.ids is None else len(self.ids) + 1
        self.rows = self.at_least(rows.comp, rows.corr)

    def at_least(self, comp: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """The key of (comp, corr): rows of comp with an id >= corr have keys >= it, the others below."""
        if self.ids is None:
            key: np.ndarray = comp * self.width + (np.clip(corr, self.low - 1, self.high + 1) - self.low + 1)
            return key
        out: np.ndarray = comp * self.width + np.searchsorted(self.ids, corr, side="left")
        return out


@dataclass(frozen=True)
class StreamRows:
    """The access rows of one stream sorted by (component, correlation id), all and writers only."""

    rows: np.ndarray
    keys: np.ndarray
    writes: np.ndarray
    write_keys: np.ndarray


def _stream_rows(rows: AccessRows, keys: _Keys, s: int) -> StreamRows:
    mine = np.flatnonzero(rows.col == s)
    mine = mine[np.argsort(keys.rows[mine], kind="stable")]
    w = mine[(rows.mode[mine] & WRITE) > 0]
    return StreamRows(mine, keys.rows[mine], w, keys.rows[w])


def _search(index: OrderingIndex, rows: AccessRows, keys: _Keys, on_t: np.ndarray, rank: np.ndarray, cons: StreamRows,
            prods: StreamRows, s: int, found: _Found, at: WaitPositions) -> None:
    """Unordered and newly ordered conflicting pairs between the consumer rows of one stream (its
    kernels on_t in correlation order; rank: each consumer row's kernel's position there; at: their
    wait_positions) and the producer rows of stream s."""
    front = np.maximum.accumulate(index.frontier(on_t, s, at)) if len(on_t) else on_t
    b = cons.rows
    lo_key = keys.at_least(rows.comp[b], np.minimum(front[rank], rows.corr[b]))
    frontier_at = np.searchsorted(prods.keys, lo_key)  # shared by the writers' windows and _ordered
    writer = (rows.mode[b] & WRITE) > 0
    for pool, pool_keys, mine in ((prods.rows, prods.keys, writer), (prods.writes, prods.write_keys, ~writer)):
        lo = frontier_at[mine] if pool is prods.rows else np.searchsorted(pool_keys, lo_key[mine])
        hi = np.searchsorted(pool_keys, cons.keys[mine])
        p, c = _overlapping(rows, pool, b[mine], lo, hi)
        found.producer.append(p)
        found.consumer.append(c)
    _ordered(rows, keys, b, prods, frontier_at, found)


def _overlapping(rows: AccessRows, pool: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The (producer, consumer) row pairs in the windows whose byte ranges overlap."""
    n = np.maximum(hi - lo, 0)
    p = pool[expand_ranges(lo, n)]
    c = np.repeat(b, n)
    hit = (rows.address[p] < rows.end[c]) & (rows.address[c] < rows.end[p])
    return p[hit], c[hit]


def _ordered(rows: AccessRows, keys: _Keys, b: np.ndarray, prods: StreamRows, frontier_at: np.ndarray, found: _Found) -> None:
    """Conflicting pairs whose order is established: each producer counted against the first consumer
    access of its component on this stream that it is ordered before (windows [previous F, F);
    frontier_at: F's position in prods.keys). b is sorted by (component, correlation id), so its
    frontier keys rise within a component."""
    comp = rows.comp[b]
    first = np.r_[True, comp[1:] != comp[:-1]] if len(b) else np.zeros(0, dtype=bool)
    start = np.r_[0, frontier_at[:-1]][:len(b)]
    start[first] = np.searchsorted(prods.keys, comp[first] * keys.width)
    p, c = _overlapping(rows, prods.rows, b, start, frontier_at)
    conflict = ((rows.mode[p] | rows.mode[c]) & WRITE) > 0
    found.ordered_p.append(p[conflict])
    found.ordered_c.append(c[conflict])


def coverage(trace: Trace, index: OrderingIndex, with_memory: np.ndarray, branched: np.ndarray,
             launched: np.ndarray | None = None) -> tuple[Coverage, ...]:
    """Every kind of operation seen, judged (has a memory set) and unjudged where that matters.
    branched: per operation, whether it belongs to a graph launch whose internal pairs are not judged.
    launched: per operation, its launch's host time (-1: unknown), for the memory capture window:
    operations without a memory set launched outside it are counted there, not under their kind."""
    kinds = trace.kernels.kinds()
    blind = _unjudged(index, with_memory)
    window = trace.memory.window if trace.memory is not None else None
    outside = np.zeros(len(kinds), dtype=bool)
    if window is not None and not window.whole_run:
        t = launched if launched is not None else np.full(len(kinds), -1, dtype=np.int64)
        outside = ~with_memory & window.outside(np.where(t >= 0, t, trace.kernels.start))
        blind = blind & ~outside
    names, inverse = np.unique(trace.kernels.name, return_inverse=True)
    nccl = np.array([trace.strings[n].startswith(COLLECTIVE_PREFIX) for n in names.tolist()], dtype=bool)
    collective = nccl[inverse.reshape(-1)] if len(names) else np.zeros(0, dtype=bool)
    collective = collective | _launched_by_collective(trace)
    masks = {Covered.KERNEL: (kinds == KERNEL) & ~collective, Covered.COLLECTIVE: (kinds == KERNEL) & collective,
             Covered.MEMCPY: kinds == MEMCPY, Covered.MEMSET: kinds == MEMSET}
    out = [Coverage(kind=k, seen=int(m.sum()), judged=int((m & with_memory).sum()), unjudged=int((m & blind).sum()))
           for k, m in masks.items()]
    node = trace.kernels.graph_node
    replayed = node > 0 if node is not None else np.zeros(len(kinds), dtype=bool)
    out.append(Coverage(kind=Covered.GRAPH_INTERNAL, seen=int(replayed.sum()), judged=int((replayed & ~branched).sum()),
                        unjudged=int(branched.sum())))
    memory = trace.memory
    undecoded = len(memory.unknown.corr) if memory is not None else 0
    out.append(Coverage(kind=Covered.UNDECODED, seen=undecoded, judged=0, unjudged=undecoded))
    if window is not None and not window.whole_run:
        seen = int(outside.sum())
        out.append(Coverage(kind=Covered.OUTSIDE_WINDOW, seen=seen, judged=0, unjudged=int((outside & _multi_stream(index)).sum()),
                            window=window.what, missed=missed_ranges(trace, window)))
    return tuple(out)


def missed_ranges(trace: Trace, window: CaptureWindow) -> int:
    """NVTX ranges of the trace that a `--memory-range GLOB` window names but that overlap none of its
    intervals: the capture never saw them open (an API it could not read), their operations are
    outside the window."""
    glob = window_glob(window.what)
    r = trace.ranges
    if glob is None or not len(r.start):
        return 0
    names = np.array([fnmatch.fnmatchcase(trace.strings[int(i)], glob) for i in r.text.tolist()], dtype=bool)
    end = np.where(r.end >= 0, r.end, np.iinfo(np.int64).max)
    order = np.argsort(window.start, kind="stable")
    s, e = window.start[order], window.end[order]
    before = np.searchsorted(s, end, side="right")  # windows starting before each range ends
    latest_end = np.maximum.accumulate(e) if len(e) else e
    overlaps = (before > 0) & (latest_end[np.maximum(before - 1, 0)] >= r.start) if len(e) else np.zeros(len(names), dtype=bool)
    return int((names & ~overlaps).sum())


def window_glob(what: str) -> str | None:
    """The glob of a window named "NVTX ranges 'GLOB'" (tracer/capture/window.py's describe), else None."""
    prefix = "NVTX ranges "
    if not what.startswith(prefix):
        return None
    try:
        glob = ast.literal_eval(what[len(prefix):])
    except (ValueError, SyntaxError):
        return None
    return glob if isinstance(glob, str) else None


def _launched_by_collective(trace: Trace) -> np.ndarray:
    """Per operation: a kernel launched inside a c10d op (NCCL's one-rank kernel is not named nccl*)."""
    memory, k = trace.memory, trace.kernels
    out = np.zeros(len(k), dtype=bool)
    if memory is None or len(memory.launches.corr) == 0:
        return out
    la = memory.launches
    ops = unique(la.op_name[la.op_name >= 0])
    c10d = ops[[trace.strings[int(n)].startswith(COLLECTIVE_OP_PREFIX) for n in ops.tolist()]] if len(ops) else ops
    if len(c10d) == 0:
        return out
    from tracer.readers.memory_reader import access_corr  # start-up: only traces with memory tables get here (issue 27)

    corr = access_corr(memory, k)
    at = np.clip(np.searchsorted(la.corr, corr), 0, len(la.corr) - 1)
    found: np.ndarray = (la.corr[at] == corr) & np.isin(la.op_name[at], c10d)
    return found


def find_hazards(trace: Trace, attr: Attribution, index: OrderingIndex, graph_launches: Launches | None = None) -> Hazards:
    """graph_launches: the operations replayed from CUDA graphs by launch (graphs.launches); those of
    a launch with parallel branches are judged against each other with the graph's edges where the
    capture read them, else counted as not judged."""
    memory = trace.memory
    if memory is None or not memory.recorded:
        return Hazards(memory=False, note=NSYS_NOTE if trace.producer.startswith("nsys ") else NO_MEMORY_NOTE)
    rows, with_memory = access_rows(trace, index, memory)
    found = _search_all(index, rows)
    p, c = _cat(found.producer), _cat(found.consumer)
    branched = np.zeros(len(trace.kernels), dtype=bool)
    if graph_launches is not None and len(graph_launches.branched):
        internal = internal_pairs(trace, graph_launches, memory)
        unjudged = graph_launches.branched & ~internal.judged
        branched[graph_launches.ops[np.repeat(unjudged, np.diff(graph_launches.offset))]] = True
        rows, p, c = _with_internal(trace, index, memory, rows, p, c, internal)
    kinds, may = _classify(memory, rows, p, c)
    first, group_may = _groups(rows.kernel[p], rows.kernel[c], kinds, may)
    counts = {kind.value: int((kinds[first] == i).sum()) for i, kind in enumerate(KINDS)}
    counts["may"] = int(group_may.sum())
    op_, oc = _cat(found.ordered_p), _cat(found.ordered_c)
    counts["ordered"] = len(_groups(rows.kernel[op_], rows.kernel[oc], np.zeros(len(op_), dtype=np.int64),
                                    np.ones(len(op_), dtype=bool))[0])
    listed = _listed(trace, attr, memory, rows, p[first], c[first], kinds[first], group_may)
    kernel = trace.kernels.kinds() == KERNEL
    return Hazards(memory=True, kernels_with_memory=int((with_memory & kernel).sum()), kernels_without_memory=int((~with_memory & kernel).sum()),
                   unjudged=int(_unjudged(index, with_memory).sum()), launch_unknown=_launch_unknown(trace, memory), counts=tuple(counts.items()),
                   listed=listed,
                   host_queries=len(memory.queries.corr), unmatched_queries=index.unmatched_queries, graph_kernels=_graph_kernels(trace, with_memory),
                   coverage=coverage(trace, index, with_memory, branched, attr.launch_start))


def _with_internal(trace: Trace, index: OrderingIndex, memory: Memory, rows: AccessRows, p: np.ndarray, c: np.ndarray,
                   internal: InternalPairs) -> tuple[AccessRows, np.ndarray, np.ndarray]:
    """The access rows with those of the graph-internal pairs appended, and the pairs' positions
    added to p and c: classified, grouped and listed like cross-stream pairs."""
    n = len(internal.producer)
    if n == 0:
        return rows, p, c
    kern = np.r_[internal.producer, internal.consumer]
    row = np.r_[internal.producer_row, internal.consumer_row]
    la = memory.launches
    extra = AccessRows(kernel=kern, row=row, col=index.kernel_col[kern], corr=trace.kernels.corr[kern], address=la.address[row],
                       end=la.address[row] + la.size[row],
                       mode=la.mode[row], comp=np.full(2 * n, -1, dtype=np.int64))
    base = len(rows.kernel)
    merged = AccessRows(**{f: np.r_[getattr(rows, f), getattr(extra, f)] for f in AccessRows.__dataclass_fields__})
    return merged, np.r_[p, base + np.arange(n)], np.r_[c, base + n + np.arange(n)]


def _search_all(index: OrderingIndex, rows: AccessRows) -> _Found:
    """_search for every pair of streams on one device that touch one address component (no other
    pair can conflict), one consumer stream per task: numpy drops the GIL in the searches and
    gathers, so the tasks share the cores."""
    keys = _Keys(rows)
    used = unique(rows.col).tolist()
    per = {x: _stream_rows(rows, keys, x) for x in used}
    k = index.trace.kernels
    position = np.zeros(len(k.corr), dtype=np.int64)
    on: dict[int, np.ndarray] = {}
    by_stream = np.lexsort((k.corr, index.kernel_col))
    bounds = np.searchsorted(index.kernel_col[by_stream], np.arange(len(index.streams) + 1))
    for t in used:
        index.host_cover(t)  # cached here, not raced for in the tasks
        on[t] = by_stream[bounds[t]:bounds[t + 1]]
        position[on[t]] = np.arange(len(on[t]))

    partners = _partners(rows)

    def consumer(t: int) -> _Found:
        found = _Found([], [], [], [])
        rank, at = position[rows.kernel[per[t].rows]], index.wait_positions(on[t])
        for s in partners.get(t, []):
            if s != t and index.streams[s][0] == index.streams[t][0]:
                _search(index, rows, keys, on[t], rank, per[t], per[s], s, found, at)
        return found

    from concurrent.futures import ThreadPoolExecutor  # start-up: 3 ms (logging, threads) that traces without memory tables never use (issue 27)

    with ThreadPoolExecutor(max_workers=max(1, min(len(used), os.cpu_count() or 1, 4))) as pool:
        parts = list(pool.map(consumer, used))  # in stream order, whichever finishes first
    return _Found(*([a for f in parts for a in getattr(f, name)] for name in ("producer", "consumer", "ordered_p", "ordered_c")))


def _partners(rows: AccessRows) -> dict[int, list[int]]:
    """Per stream, the streams (ascending, itself included) whose access rows share an address
    component with its own: the only stream pairs whose accesses can overlap."""
    if len(rows.col) == 0:
        return {}
    width = int(rows.col.max()) + 1
    both = unique(rows.comp * width + rows.col)
    comp, col = both // width, both % width
    head = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1]])
    size = np.diff(np.r_[head, len(comp)])
    group = np.repeat(np.arange(len(head)), size)
    left = np.repeat(col, size[group])
    right = col[expand_ranges(head[group], size[group])]
    pairs = unique(left * width + right)
    t, s = pairs // width, pairs % width
    cut = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    return {int(t[a]): s[a:b].tolist() for a, b in zip(cut.tolist(), [*cut[1:].tolist(), len(t)])}


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _classify(memory: Memory, rows: AccessRows, p: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kind code (position in KINDS) and `may` per access pair."""
    la = memory.launches
    pa, ca = _contained(memory, rows.row[p]), _contained(memory, rows.row[c])
    pm, cm = rows.mode[p], rows.mode[c]
    pw, pr, cw, cr = (pm & WRITE) > 0, (pm & READ) > 0, (cm & WRITE) > 0, (cm & READ) > 0
    kind = np.where(pw & cr, KINDS.index(HazardKind.RAW), np.where(pr & cw, KINDS.index(HazardKind.WAR),
                                                                   KINDS.index(HazardKind.WAW)))
    kind = np.where((pa >= 0) & (ca >= 0) & (pa != ca), KINDS.index(HazardKind.REUSE), kind).astype(np.int64)
    may = (la.exact[rows.row[p]] == 0) | (la.exact[rows.row[c]] == 0)
    return kind, may


def _contained(memory: Memory, row: np.ndarray) -> np.ndarray:
    """Each access row's allocation id, -1 where the allocation is known and the access runs past it:
    a copy that crosses from one allocation into the next is not reuse of the second's bytes."""
    la, a = memory.launches, memory.allocations
    alloc: np.ndarray = la.allocation[row]
    if len(a.id) == 0:
        return alloc
    at = a.row_of(alloc)
    safe = np.maximum(at, 0)
    past = (at >= 0) & ((la.address[row] < a.address[safe]) | (la.address[row] + la.size[row] > a.address[safe] + a.size[safe]))
    return np.where(past, -1, alloc)


def _groups(pk: np.ndarray, ck: np.ndarray, kinds: np.ndarray, flag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One access pair per (producer kernel, consumer kernel, kind), the first found, and whether
    flag holds for every access pair of its group."""
    order = np.lexsort((np.arange(len(pk)), kinds, ck, pk))
    if len(order) == 0:
        return order, np.zeros(0, dtype=bool)
    head = np.flatnonzero(np.r_[True, (pk[order][1:] != pk[order][:-1]) | (ck[order][1:] != ck[order][:-1])
                                | (kinds[order][1:] != kinds[order][:-1])])
    return order[head], np.logical_and.reduceat(flag[order], head)


def _unjudged(index: OrderingIndex, with_memory: np.ndarray) -> np.ndarray:
    """Per operation: without a memory set on a device where more than one stream ran operations."""
    out: np.ndarray = ~with_memory & _multi_stream(index)
    return out


def _multi_stream(index: OrderingIndex) -> np.ndarray:
    """Per operation: on a device where more than one stream ran operations."""
    if len(index.kernel_col) == 0:
        return np.zeros(0, dtype=bool)
    dev = np.array([d for d, _ in index.streams], dtype=np.int64)
    used = unique(index.kernel_col)
    devs, n = np.unique(dev[used], return_counts=True)
    return np.isin(dev[index.kernel_col], devs[n > 1])


def _graph_kernels(trace: Trace, with_memory: np.ndarray) -> tuple[int, int]:
    node = trace.kernels.graph_node
    if node is None:
        return 0, 0
    replayed = node > 0
    return int(replayed.sum()), int((replayed & ~with_memory).sum())


def _launch_unknown(trace: Trace, memory: Memory) -> tuple[tuple[str, int, str], ...]:
    u = memory.unknown
    names = [trace.strings[int(n)] if n >= 0 else "<unknown>" for n in u.name.tolist()]
    counts: dict[tuple[str, str], int] = {}
    for name, reason in zip(names, u.reason):
        counts[(name, reason)] = counts.get((name, reason), 0) + 1
    return tuple((name, n, reason) for (name, reason), n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _listed(trace: Trace, attr: Attribution, memory: Memory, rows: AccessRows, p: np.ndarray, c: np.ndarray,
            kinds: np.ndarray, may: np.ndarray) -> tuple[Hazard, ...]:
    """Up to MAX_LISTED_HAZARDS, those that ran at the same time first, then in submission order."""
    k = trace.kernels
    pk, ck = rows.kernel[p], rows.kernel[c]
    gap = k.start[ck] - k.end[pk]
    pick = np.lexsort((rows.corr[p], rows.corr[c], gap >= 0))[:MAX_LISTED_HAZARDS]
    out = []
    for i in pick.tolist():
        start = max(int(rows.address[p[i]]), int(rows.address[c[i]]))
        stop = min(int(rows.end[p[i]]), int(rows.end[c[i]]))
        kind = KINDS[int(kinds[i])]
        alloc = _allocation(trace, memory, int(memory.launches.allocation[rows.row[c[i]]]))
        prev = _allocation(trace, memory, int(memory.launches.allocation[rows.row[p[i]]])) if kind is HazardKind.REUSE else None
        out.append(Hazard(kind=kind, may=bool(may[i]), gap_ns=int(gap[i]), producer=_kernel_ref(trace, attr, memory, rows, p[i]),
                          consumer=_kernel_ref(trace, attr, memory, rows, c[i]), address=start, bytes=stop - start, allocation=alloc,
                          previous_allocation=prev))
    return tuple(out)


def _kernel_ref(trace: Trace, attr: Attribution, memory: Memory, rows: AccessRows, row: int) -> KernelRef:
    kern = int(rows.kernel[row])
    rng = int(attr.range_of_kernel[kern])
    name = int(memory.launches.op_name[rows.row[row]])
    k = trace.kernels
    return KernelRef(kernel=trace.kernel_name(kern), range=trace.strings[int(trace.ranges.text[rng])] if rng >= 0 else "<unattributed>",
                     rule=attr.rule_of(kern).value, stream=int(k.stream[kern]), corr=int(k.corr[kern]),
                     op=trace.strings[name] if name >= 0 else None, start_ns=int(k.start[kern]), end_ns=int(k.end[kern]), index=kern)


def _allocation(trace: Trace, memory: Memory, alloc_id: int) -> AllocationRef | None:
    a = memory.allocations
    row = int(a.row_of(np.array([alloc_id], dtype=np.int64))[0])
    if row < 0:
        return None
    label = int(a.label[row])
    return AllocationRef(alloc_id, trace.strings[label] if label >= 0 else None, int(a.size[row]), int(a.stream[row]))
