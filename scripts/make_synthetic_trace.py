"""Synthetic traces in the nsys export schema (plus tracer's TRACER_* memory tables), for benchmarks
and for CPU tests that need shapes no fixture has.

`TraceBuilder` writes what a capture would: launches, NVTX ranges, event record -> wait pairs, host
syncs, and (memory) ops, their byte-range accesses, allocations and successful host queries, with
GPU times from a simple model (a stream runs its kernels one after another; a wait holds a stream
until the recorded work is done; a host sync holds the host until the work it waits for is done).

`generate()` is the benchmark trace: N kernels in NVTX ranges of kernels/ranges kernels named like
the seed workloads, each range on the main stream or (every third range) on a side stream,
cross-stream record -> wait pairs, optional host syncs, and with --memory an op per kernel reading
and writing allocations (one new allocation per range, addresses reused after free): then a range
runs on one stream and reads the previous range's output after an event wait, except for a
fraction --races of range changes (planted races).
Usage: python scripts/make_synthetic_trace.py OUT.sqlite [--kernels 1000000] [--ranges 100000]
       [--waits 10000] [--streams 4] [--host-syncs 0] [--memory] [--allocations 100000] [--races 0.01]
"""
from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tracer.capture.nsys_schema import TraceRecords, global_tid, write_sqlite
from tracer.readers.memory_reader import MEMORY_TABLES

STREAMS = (7, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27)
LAUNCH_NS, QUEUE_NS = 2_000, 5_000  # host time of a launch call; launch -> earliest GPU start
SYNC_TYPE = {"event": 1, "wait": 2, "stream": 3, "context": 4}


@dataclass
class TraceBuilder:
    pid: int = 4242
    tid: int = 4242
    t: int = 1_000_000  # host clock
    corr: int = 0
    rec: TraceRecords = field(default_factory=lambda: TraceRecords(pid=4242))
    free: dict[tuple[int, int], int] = field(default_factory=dict)  # (device, stream) -> GPU free at
    events: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)  # key -> (device, stream, corr, done at)
    tables: dict[str, list[tuple]] = field(default_factory=lambda: {t: [] for t in MEMORY_TABLES})
    strings: dict[str, int] = field(default_factory=dict)  # extra StringIds (names, labels), by placeholder id
    marker: int = 0
    open_ranges: dict[int, list[int]] = field(default_factory=dict)

    def _api(self, name: str, tid: int | None, dur: int = LAUNCH_NS) -> tuple[int, int, int]:
        self.corr += 1
        start = self.t
        self.rec.apis.append((start, start + dur, 1, self.tid if tid is None else tid, self.corr, name, 0))
        self.t += dur + 1_000
        return self.corr, start, start + dur

    def launch(self, stream: int, name: str = "kernel", dur: int = 10_000, *, device: int = 0, tid: int | None = None,
               op: int | None = None, start: int | None = None) -> int:
        """A kernel launch (cuLaunchKernel on the host, the kernel on the GPU); `op`: inside that op."""
        corr, t0, _ = self._api("cuLaunchKernel", tid)
        key = (device, stream)
        begin = start if start is not None else max(t0 + QUEUE_NS, self.free.get(key, 0))
        self.free[key] = max(self.free.get(key, 0), begin + dur)
        self.rec.kernels.append((begin, begin + dur, device, device + 1, stream, corr, name,
                                 1, 1, 1, 128, 1, 1, 32, 0, 0, 0, 0))
        if op is not None:
            self.tables["TRACER_EXTERNAL_CORRELATION"].append((corr, op))
        return corr

    def copy(self, stream: int, size: int, kind: int = 8, dur: int = 4_000, *, device: int = 0, tid: int | None = None,
             op: int | None = None, memset: bool = False, api: str | None = None, node: int = 0) -> int:
        """cudaMemcpyAsync (CUPTI copy kind: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP) or, with memset,
        cudaMemsetAsync of `size` bytes on stream; `op`: inside that op (its accesses are the copy's)."""
        corr, t0, _ = self._api(api or ("cudaMemsetAsync" if memset else "cudaMemcpyAsync"), tid)
        key = (device, stream)
        begin = max(t0 + QUEUE_NS, self.free.get(key, 0))
        self.free[key] = begin + dur
        if memset:
            self.rec.memsets.append((begin, begin + dur, device, device + 1, stream, corr, 0, size, node))
        else:
            self.rec.memcpys.append((begin, begin + dur, device, device + 1, stream, corr, size, kind, 2, 3, node))
        if op is not None:
            self.tables["TRACER_EXTERNAL_CORRELATION"].append((corr, op))
        return corr

    def capture_launch(self, name: str, node: int, *, op: int | None = None) -> int:
        """A launch into a stream being captured into a CUDA graph: no kernel runs, it makes `node`."""
        corr, _, _ = self._api("cuLaunchKernel", None)
        if op is not None:
            self.tables["TRACER_EXTERNAL_CORRELATION"].append((corr, op))
        self.tables["TRACER_GRAPH_NODES"].append((node, corr, -1))
        return corr

    def clone_nodes(self, clones: dict[int, int]) -> None:
        """Instantiation: clone node id -> the node it was cloned from."""
        self.tables["TRACER_GRAPH_NODES"].extend((clone, -1, original) for clone, original in clones.items())

    def graph_launch(self, stream: int, nodes: list[tuple], dur: int = 10_000, *, device: int = 0,
                     record_stream: bool = False) -> int:
        """cuGraphLaunch: the kernels of `nodes` (name, graph node id[, the stream CUPTI reports it
        on, default `stream`]) one after another, all under the graph launch's correlation id;
        record_stream: the capture recorded the launch's stream (TRACER_GRAPH_LAUNCHES)."""
        corr, t0, _ = self._api("cuGraphLaunch", None)
        for name, node, *on in nodes:
            key = (device, on[0] if on else stream)
            begin = max(t0 + QUEUE_NS, self.free.get(key, 0))
            self.free[key] = begin + dur
            self.rec.kernels.append((begin, begin + dur, device, device + 1, key[1], corr, name,
                                     1, 1, 1, 128, 1, 1, 32, 0, 0, node >> 32, node))
        if record_stream:
            self.tables["TRACER_GRAPH_LAUNCHES"].append((corr, stream))
        return corr

    def graph_edges(self, nodes: list[int], edges: list[tuple[int, int]]) -> None:
        """An instantiated graph's nodes (as captured) and its edges from -> to (TRACER_GRAPH_EDGES)."""
        self.tables["TRACER_GRAPH_EDGES"].extend([(n, n) for n in nodes] + edges)

    def record(self, stream: int, *, device: int = 0, tid: int | None = None) -> int:
        """cudaEventRecord; returns the event key (its eventSyncId)."""
        corr, _, _ = self._api("cudaEventRecord", tid, 500)
        self.rec.events.append((0, device, device + 1, stream, corr, corr, corr))
        self.events[corr] = (device, stream, corr, self.free.get((device, stream), 0))
        return corr

    def wait(self, stream: int, key: int, *, device: int = 0, tid: int | None = None) -> int:
        corr, t0, t1 = self._api("cudaStreamWaitEvent", tid, 300)
        self.rec.syncs.append((t0, t1, device + 1, stream, corr, SYNC_TYPE["wait"], key, key))
        done = self.events[key][3] if key in self.events else 0
        self.free[(device, stream)] = max(self.free.get((device, stream), 0), done)
        return corr

    def _host_wait(self, api: str, kind: str, done: int, stream: int, key: int, device: int, tid: int | None) -> int:
        self.corr += 1
        start = self.t
        end = max(start + 1_000, done)
        self.rec.apis.append((start, end, 1, self.tid if tid is None else tid, self.corr, api, 0))
        self.rec.syncs.append((start, end, device + 1, stream, self.corr, SYNC_TYPE[kind], key, key))
        self.t = end + 1_000
        return self.corr

    def stream_sync(self, stream: int, *, device: int = 0, tid: int | None = None) -> int:
        return self._host_wait("cudaStreamSynchronize", "stream", self.free.get((device, stream), 0), stream, 0, device, tid)

    def device_sync(self, *, device: int = 0, tid: int | None = None) -> int:
        done = max([v for (d, _), v in self.free.items() if d == device], default=0)
        return self._host_wait("cudaDeviceSynchronize", "context", done, -1, 0, device, tid)

    def event_sync(self, key: int, *, tid: int | None = None) -> int:
        device, _, _, done = self.events[key]
        return self._host_wait("cudaEventSynchronize", "event", done, -1, key, device, tid)

    def push(self, text: str, *, tid: int | None = None, at: int | None = None) -> None:
        self.marker += 1
        t = self.tid if tid is None else tid
        self.rec.markers.append((2, self.t if at is None else at, self.marker, t, text, "tracer"))
        self.open_ranges.setdefault(t, []).append(self.marker)
        self.t += 100

    def pop(self, *, tid: int | None = None, at: int | None = None) -> None:
        t = self.tid if tid is None else tid
        self.rec.markers.append((4, self.t if at is None else at, self.open_ranges[t].pop(), t, "", "tracer"))
        self.t += 100

    # -- memory tables ---------------------------------------------------------------------
    def string(self, value: str | None) -> int | None:
        """A StringIds placeholder id for value (resolved when written)."""
        if value is None:
            return None
        return self.strings.setdefault(value, -2 - len(self.strings))

    def op(self, name: str, *, kind: int = 1, tid: int | None = None, seq: int = -1, bwd_seq: int = -1,
           corr: int | None = None, callsite: str | None = None) -> int:
        op_id = len(self.tables["TRACER_OPS"]) + 1
        t = self.tid if tid is None else tid
        self.tables["TRACER_OPS"].append((op_id, kind, self.string(name), global_tid(self.pid, t), self.t, self.t + 50,
                                          seq, bwd_seq, corr, self.string(callsite)))
        self.t += 60
        return op_id

    def access(self, op: int, address: int, size: int, mode: int, *, exact: int = 1, allocation: int = -1,
               label: str | None = None) -> None:
        self.tables["TRACER_MEMORY_ACCESS"].append((op, address, size, mode, exact, allocation, self.string(label)))

    def alloc(self, address: int, size: int, stream: int = -1, *, device: int = 0, label: str | None = None) -> int:
        alloc_id = len(self.tables["TRACER_ALLOCATIONS"]) + 1
        self.tables["TRACER_ALLOCATIONS"].append((alloc_id, device, address, size, stream, self.t, -1, 1, self.string(label)))
        return alloc_id

    def free_alloc(self, alloc_id: int) -> None:
        rows = self.tables["TRACER_ALLOCATIONS"]
        rows[alloc_id - 1] = (*rows[alloc_id - 1][:6], self.t, *rows[alloc_id - 1][7:])

    def query_event(self, key: int, *, tid: int | None = None) -> int:
        """A cudaEventQuery that returned cudaSuccess (the host waits for it here)."""
        done = self.events[key][3]
        corr, t0, t1 = self._api("cudaEventQuery", tid, 200)
        self.t = max(self.t, done + 1_000)
        self.tables["TRACER_HOST_QUERIES"].append((corr, 1, key, -1, t0, max(t1, done),
                                                   global_tid(self.pid, self.tid if tid is None else tid)))
        return corr

    def query_stream(self, stream: int, *, device: int = 0, tid: int | None = None) -> int:
        done = self.free.get((device, stream), 0)
        corr, t0, t1 = self._api("cudaStreamQuery", tid, 200)
        self.t = max(self.t, done + 1_000)
        self.tables["TRACER_HOST_QUERIES"].append((corr, 2, -1, stream, t0, max(t1, done),
                                                   global_tid(self.pid, self.tid if tid is None else tid)))
        return corr

    def launch_unknown(self, corr: int, name: str, reason: str) -> None:
        self.tables["TRACER_LAUNCH_UNKNOWN"].append((corr, self.string(name), reason))

    def write(self, out: Path, *, memory: bool | None = None, meta: dict[str, str] | None = None) -> Path:
        """The trace as SQLite (temp name, renamed when complete); memory tables with rows are written
        (all of them, and TRACER_MEMORY=1, when memory is True)."""
        tmp = out.with_name(f".{out.name}.{os.getpid()}.build")
        write_sqlite(self.rec, tmp, producer="synthetic")
        try:
            con = sqlite3.connect(tmp)
            ids = dict(con.execute("SELECT value, id FROM StringIds").fetchall())
            next_id = max(ids.values(), default=-1) + 1
            placeholder = {}
            for value, ph in self.strings.items():
                if value not in ids:
                    ids[value], next_id = next_id, next_id + 1
                    con.execute("INSERT INTO StringIds VALUES (?, ?)", (ids[value], value))
                placeholder[ph] = ids[value]
            with_memory = memory if memory is not None else any(self.tables.values())
            for table, cols in MEMORY_TABLES.items():
                rows = self.tables[table]
                if rows or with_memory:
                    con.execute(f"CREATE TABLE {table} ({cols})")
                    rows = [tuple(placeholder.get(v, v) if isinstance(v, int) and v <= -2 else v for v in r) for r in rows]
                    con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols.split(', ')))})", rows)
            extra = dict(meta or {}) | ({"TRACER_MEMORY": "1"} if with_memory else {})
            con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", list(extra.items()))
            con.commit()
            con.close()
            tmp.replace(out)
        finally:
            tmp.unlink(missing_ok=True)
        return out


NAMES = ("cast_transpose", "dgrad", "wgrad", "amax_update")


def generate(kernels: int, ranges: int, waits: int, streams: int = 4, host_syncs: int = 0, memory: bool = False,
             allocations: int = 100_000, seed: int = 0, races: float = 0.01, copies: int = 0) -> TraceBuilder:
    """copies: that many copies and memsets (one in three a memset) among the kernels, each in the
    op of the kernel before it (so with --memory it has that op's access set)."""
    rnd = random.Random(seed)
    b = TraceBuilder()
    main, sides = STREAMS[0], STREAMS[1:streams]
    per_range = max(1, kernels // ranges)
    wait_every = max(1, kernels // max(waits, 1))
    sync_every = max(1, kernels // host_syncs) if host_syncs else 0
    mem = _MemoryPlan(b, rnd, allocations, ranges) if memory else None
    mid = n_waits = 0
    previous = stream = main
    for i in range(kernels):
        r = i // per_range
        if not mem:  # the kernels of a side range spread over the side streams
            stream = main if r % 3 else sides[i % len(sides)]
        if i % per_range == 0 and mid < ranges:
            if mid:
                b.pop()
            mid += 1
            step, layer = divmod(mid // len(NAMES), 64)
            b.push(f"step{step}/layer{layer}/mb0/{NAMES[mid % len(NAMES)]}")
            if mem:  # a range on one stream reads the previous range's output: after an event wait, but for `races`
                previous, stream = stream, main if r % 3 else sides[r % len(sides)]
                if stream != previous and rnd.random() >= races:
                    b.wait(stream, b.record(previous))
                mem.new_range(stream)
        op = mem.kernel(i % per_range, per_range) if mem else None
        b.launch(stream, "cast_transpose" if i % 2 else "nvjet_sm90_tst", rnd.randint(2_000, 20_000), op=op)
        if copies and (i * copies) // kernels != ((i + 1) * copies) // kernels:
            n = (i * copies) // kernels
            b.copy(stream, 1 << 16, (1, 2, 8)[n % 3], op=op, memset=n % 3 == 2)
        if i % wait_every == wait_every - 1 and n_waits < waits:
            b.wait(sides[(i // wait_every) % len(sides)], b.record(main))
            n_waits += 1
        if sync_every and i % sync_every == sync_every - 1:
            b.stream_sync(rnd.choice((main, *sides))) if rnd.random() < 0.8 else b.device_sync()
    b.pop()
    return b


class _MemoryPlan:
    """One op per kernel: it writes a slice of its range's allocation, the range's first kernel
    reads the previous range's (across streams when the range changed stream); allocations are
    freed after a while and their addresses reused."""

    SLOT = 1 << 20

    def __init__(self, b: TraceBuilder, rnd: random.Random, allocations: int, ranges: int) -> None:
        self.b, self.rnd = b, rnd
        self.slots = max(16, allocations // 4)
        self.every = max(1, ranges // allocations)
        self.live: list[int] = []
        self.current = self.previous = (0, 0, -1)  # (address, bytes, allocation id)
        self.n = 0

    def new_range(self, stream: int) -> None:
        self.n += 1
        if (self.n - 1) % self.every:
            return
        address = (1 << 40) + (len(self.b.tables["TRACER_ALLOCATIONS"]) % self.slots) * self.SLOT
        size = self.rnd.choice((256 << 10, 512 << 10, 1 << 20))
        alloc = self.b.alloc(address, size, stream, label=f"aten::empty at train.py:{self.n % 500}")
        self.previous, self.current = self.current, (address, size, alloc)
        self.live.append(alloc)
        if len(self.live) > self.slots // 2:
            self.b.free_alloc(self.live.pop(0))

    def kernel(self, j: int, per_range: int) -> int:
        """The j-th kernel of the range writes its slice of the range's allocation; the first also
        reads the first half of the previous range's."""
        op = self.b.op("aten::mm")
        address, size, alloc = self.current
        part = size // per_range
        self.b.access(op, address + j * part, part, 2, allocation=alloc)
        if j == 0 and self.previous[2] >= 0:
            self.b.access(op, self.previous[0], self.previous[1] // 2, 1, allocation=self.previous[2])
        return op


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--ranges", type=int, default=100_000)
    ap.add_argument("--waits", type=int, default=10_000)
    ap.add_argument("--streams", type=int, default=4, choices=range(2, len(STREAMS) + 1))
    ap.add_argument("--host-syncs", type=int, default=0)
    ap.add_argument("--memory", action="store_true", help="write TRACER_* memory tables (an op per kernel)")
    ap.add_argument("--allocations", type=int, default=100_000)
    ap.add_argument("--races", type=float, default=0.01, help="--memory: range changes of stream without a wait")
    ap.add_argument("--copies", type=int, default=0, help="copies and memsets among the kernels (one in three a memset)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    b = generate(args.kernels, args.ranges, args.waits, args.streams, args.host_syncs, args.memory, args.allocations,
                 args.seed, args.races, args.copies)
    b.write(args.out, memory=args.memory)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
