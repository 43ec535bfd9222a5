"""Memory access sets per kernel: tracer's TRACER_* tables (docs/design/capture-memory-jobs.md) read
into frozen columnar data.

A kernel's access set is the accesses of the op its launch call belongs to: the launch's
correlation id maps to the op through TRACER_EXTERNAL_CORRELATION (or TRACER_OPS.correlationId for
decoded launch arguments, kind 3). A kernel replayed from a CUDA graph has no launch of its own: its
graph node (graphNodeId) leads through TRACER_GRAPH_NODES (clone -> original node -> the launch that
made it while its stream was captured) to that launch's correlation id, and so to its op. The
reader lets SQLite do those joins and fetches one row per (launch, access), plus the few op columns
attribution needs, rather than every op.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tracer.errors import TraceFormatError
from tracer.format.memory_tables import FLAG, MEMORY_TABLES, WINDOW  # writers import MEMORY_TABLES from here too
from tracer.format.memory_tables import READ as READ, WRITE as WRITE  # re-exported: the access mode bits, for the readers' callers
from tracer.model.memory import (Allocations, BackwardLaunches, CaptureWindow, ForwardOps, GraphLaunches, GraphNodes, HostQueries,
                                         KernelAccesses, LaunchAccesses, LaunchUnknown, Memory)
from tracer.model.arrays import unique
from tracer.model.trace import Kernels, expand_ranges, from_columns
from tracer.readers.sqlite_tables import TIME_LIMIT, Col, SqliteTables, is_integer, type_check

MAX_CLONE_DEPTH = 64  # graph node clones of clones followed (instantiation clones once, cudaGraphClone adds one)
OPS = [Col("id", None), Col("kind", None), Col("nameId"), Col("globalTid"), Col("start", None), Col("seqNr"),
       Col("bwdSeqNr"), Col("correlationId")]
EXTERNAL = [Col("correlationId", None), Col("externalId", None)]
MAX_FANOUT = 16  # (launch, access) rows per stored access or launch row (a foreach op launching a few kernels)
MAX_EXPANDED_ROWS = 8_000_000  # ... or this many in all, whichever is more (448 MB of int64 columns)
REQUIRED = ("TRACER_OPS", "TRACER_MEMORY_ACCESS")  # the capture writes both whenever it records access sets
ACCESS = [Col("opId", None), Col("address", None), Col("bytes", None), Col("mode", None), Col("exact", 1), Col("allocationId")]


def start_memory(db: SqliteTables, meta: dict[str, str]) -> Callable[[], Memory | None]:
    """Start reading the memory tables on a second connection in a thread (SQLite runs its queries
    without the GIL, so this overlaps the caller's own reads); the function returned waits and
    finishes in the caller's thread, which owns db.strings. It returns None when the trace has no
    TRACER_ table and no TRACER_MEMORY flag."""
    present = {t for t in MEMORY_TABLES if t in db.tables}
    if not present and meta.get(FLAG) != "1":
        return lambda: None

    recorded = meta.get(FLAG) == "1" or bool(present & {"TRACER_OPS", "TRACER_MEMORY_ACCESS"})
    missing = [t for t in REQUIRED if t not in present]
    if recorded and missing:  # without them every kernel would read as touching nothing: 0 hazards, unproven
        raise TraceFormatError(f"{db.path}: memory access sets were recorded ({FLAG}=1 or TRACER_ tables present) but "
                               f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing (truncated or edited capture)")
    job = db.in_sibling(lambda own: _fetch(own, present))
    return lambda: _finish(db, recorded, job.result(), meta.get(WINDOW, ""))


@dataclass(frozen=True, kw_only=True)
class _Fetched:
    """Memory's columns as read, names still StringIds ids."""

    launches: list[np.ndarray]
    backward: list[np.ndarray]
    forward: list[np.ndarray]
    allocations: list[np.ndarray]
    queries: list[np.ndarray]
    unknown: list[np.ndarray]
    reasons: list[str | None]
    graph_nodes: GraphNodes
    graphs: GraphLaunches
    windows: list[np.ndarray]


def _fetch(db: SqliteTables, present: set[str]) -> _Fetched:
    none = np.zeros(0, dtype=np.int64)

    def ints(table: str, cols: list[Col]) -> list[np.ndarray]:
        return db.ints(table, cols) if table in present else [none] * len(cols)

    corr, name, address, size, mode_exact, allocation, op = _launch_accesses(db, present)
    if (mode_exact < 0).any():  # mode outside 0..3
        raise TraceFormatError(f"{db.path}: TRACER_MEMORY_ACCESS.mode holds values other than 1 (read), 2 (write), 3 (both)")
    launches = _sorted_by([corr, name, address, size, mode_exact & 3, mode_exact >> 2, allocation, op], 0)
    _check_accesses(db, launches)
    has_forward, has_backward = _sequence_numbers(db, present)
    backward = _sorted_by(_backward(db, present) if has_backward else [none] * 3, 0)
    forward = db.ints("TRACER_OPS", [Col("seqNr"), Col("globalTid"), Col("start", None)], "WHERE seqNr >= 0") \
        if has_forward else [none] * 3
    forward = [c[np.lexsort((forward[2], forward[0]))] for c in forward]
    alloc = _sorted_by(ints("TRACER_ALLOCATIONS", [Col("id", None), Col("deviceId", 0), Col("address", None),
                                                   Col("bytes", None), Col("streamId"), Col("start"), Col("end"),
                                                   Col("source", 3), Col("labelId")]), 0)
    queries = ints("TRACER_HOST_QUERIES", [Col("correlationId"), Col("kind", None), Col("recordCorrelationId"),
                                           Col("streamId"), Col("start", None), Col("end", None), Col("globalTid")])
    db.check_times("TRACER_HOST_QUERIES", queries[4], queries[5])
    unknown = ints("TRACER_LAUNCH_UNKNOWN", [Col("correlationId"), Col("nameId")])
    reasons = db.texts("TRACER_LAUNCH_UNKNOWN", "reason")[1] if "TRACER_LAUNCH_UNKNOWN" in present else []
    nodes = graph_nodes(*ints("TRACER_GRAPH_NODES", [Col("nodeId", None), Col("correlationId"), Col("originalNodeId")]))
    launched = _sorted_by(ints("TRACER_GRAPH_LAUNCHES", [Col("correlationId", None), Col("streamId", None)]), 0)
    edges = ints("TRACER_GRAPH_EDGES", [Col("fromNodeId", None), Col("toNodeId", None)])
    windows = ints("TRACER_MEMORY_WINDOWS", [Col("start", None), Col("end", None)])
    db.check_times("TRACER_MEMORY_WINDOWS", windows[0], windows[1])
    return _Fetched(launches=launches, backward=backward, forward=forward, allocations=alloc, queries=queries, unknown=unknown, reasons=reasons,
                    graph_nodes=nodes, graphs=GraphLaunches(*launched, *edges), windows=windows)


def graph_nodes(node: np.ndarray, corr: np.ndarray, original: np.ndarray) -> GraphNodes:
    """Each node's making launch: its own row's correlation id, else its original's (clones of
    clones followed up to MAX_CLONE_DEPTH; a cycle, a longer chain or one that ends at no launch
    gives -1, and the node's kernels stay without a memory set)."""
    made: dict[int, int] = {n: c for n, c in zip(node.tolist(), corr.tolist()) if c >= 0}
    parent = {n: o for n, o in zip(node.tolist(), original.tolist()) if o >= 0}

    def maker(at: int) -> int:
        for _ in range(MAX_CLONE_DEPTH):
            if at in made or at not in parent:
                break
            at = parent[at]
        return made.get(at, -1)

    keys = unique(node)
    return GraphNodes(keys, np.array([maker(n) for n in keys.tolist()], dtype=np.int64),
                      np.array([parent.get(n, n) for n in keys.tolist()], dtype=np.int64))


def _window(what: str, windows: list[np.ndarray]) -> CaptureWindow:
    """The capture window: named by the metadata; windows without that name still bound what was
    recorded (a window named with no rows: nothing was, every operation is outside)."""
    if not what and len(windows[0]):
        what = "capture windows"
    return CaptureWindow(what=what, start=windows[0], end=windows[1]) if what else CaptureWindow()


def _finish(db: SqliteTables, recorded: bool, f: _Fetched, window: str = "") -> Memory:
    launches, alloc = list(f.launches), list(f.allocations)
    launches[1], alloc[8] = _names(db, launches[1]), _names(db, alloc[8])
    return Memory(recorded=recorded, launches=from_columns(LaunchAccesses, launches), backward=BackwardLaunches(*f.backward),
                  forward=ForwardOps(*f.forward),
                  allocations=from_columns(Allocations, alloc), queries=from_columns(HostQueries, f.queries),
                  unknown=LaunchUnknown(f.unknown[0], _names(db, f.unknown[1]), tuple(r or "" for r in f.reasons)), graph_nodes=f.graph_nodes,
                  graphs=f.graphs, window=_window(window, f.windows))


def _launch_accesses(db: SqliteTables, present: set[str]) -> list[np.ndarray]:
    """(launch corr, op name, address, bytes, mode | exact << 2, allocation): the launches' ops from
    SQLite (a lookup by TRACER_OPS.id per external correlation), their accesses from one scan, joined
    by op id here (SQLite would build a temporary index on TRACER_MEMORY_ACCESS.opId for the join)."""
    none = np.zeros(0, dtype=np.int64)
    if "TRACER_OPS" not in present:
        return [none] * 7
    corr, op, name = _launch_ops(db, present)
    if "TRACER_MEMORY_ACCESS" in present:
        have = db.require("TRACER_MEMORY_ACCESS", ACCESS)
        packed = ("CASE WHEN mode BETWEEN 0 AND 3 THEN mode + 4 * (COALESCE(exact, 1) != 0) ELSE -1 END"
                  if "exact" in have else "CASE WHEN mode BETWEEN 0 AND 3 THEN mode + 4 ELSE -1 END")
        acc = db.fetch("TRACER_MEMORY_ACCESS", ["opId", "address", "bytes", packed, "COALESCE(allocationId, -1)"],
                       type_check(ACCESS, have), "FROM TRACER_MEMORY_ACCESS",
                       lambda: db.check_types("TRACER_MEMORY_ACCESS", ACCESS))
        acc = _sorted_by(acc, 0)
        _check_orphans(db)
    else:
        acc = [none] * 5
    lo, hi = np.searchsorted(acc[0], op, side="left"), np.searchsorted(acc[0], op, side="right")
    n = np.maximum(hi - lo, 1)  # an op without accesses keeps one row (mode 0): its set is known empty
    _check_fanout(db, n, op, len(acc[0]) + len(op))
    at = expand_ranges(lo, n)
    has = np.repeat(hi > lo, n)
    pick = np.minimum(at, max(len(acc[0]) - 1, 0))

    def column(i: int, empty: int) -> np.ndarray:
        return np.where(has, acc[i][pick], empty) if len(acc[0]) else np.full(len(at), empty, dtype=np.int64)

    return [np.repeat(corr, n), np.repeat(name, n), column(1, -1), column(2, 0), column(3, 4), column(4, -1), np.repeat(op, n)]


def _check_fanout(db: SqliteTables, n: np.ndarray, op: np.ndarray, stored: int) -> None:
    """Each launch gets its op's whole access set, so memory grows with launches x accesses per op:
    a file whose 2M valid rows put many launches on one op with many accesses would need terabytes.
    Bound: at most MAX_FANOUT (launch, access) rows per stored row, or MAX_EXPANDED_ROWS in all,
    whichever is more (7 int64 columns: 56 bytes a row)."""
    total = int(n.sum())
    if total <= max(MAX_FANOUT * stored, MAX_EXPANDED_ROWS):
        return
    ops, per_op = np.unique(op, return_counts=True)
    launches = dict(zip(ops.tolist(), per_op.tolist()))
    worst = int(op[np.argmax(n * np.array([launches[o] for o in op.tolist()], dtype=np.int64))])
    accesses = int(n[np.flatnonzero(op == worst)[0]])
    raise TraceFormatError(f"{db.path}: memory access sets would expand to {total} (launch, access) rows from {stored} stored "
                           f"rows (op {worst}: {launches[worst]} launches x {accesses} accesses); at most "
                           f"{max(MAX_FANOUT * stored, MAX_EXPANDED_ROWS)} are read (corrupt or hostile file)")


def _check_orphans(db: SqliteTables) -> None:
    """Access rows name an op that exists (TRACER_OPS.id is its rowid: one lookup each); an access
    of no op would leave some kernel's set looking emptier than it was."""
    with db.reading("TRACER_MEMORY_ACCESS.opId"):
        row = db.con.execute("SELECT count(*), min(a.opId) FROM TRACER_MEMORY_ACCESS a "
                             "WHERE NOT EXISTS (SELECT 1 FROM TRACER_OPS o WHERE o.id = a.opId)").fetchone()
    if row[0]:
        raise TraceFormatError(f"{db.path}: TRACER_MEMORY_ACCESS: {row[0]} row(s) name an op that TRACER_OPS does not hold "
                               f"(first opId {row[1]}; truncated or edited capture)")


def _launch_ops(db: SqliteTables, present: set[str]) -> list[np.ndarray]:
    """(launch corr, op id, op nameId) for every launch made inside an op."""
    ops = db.require("TRACER_OPS", OPS)
    ok = type_check([Col("id", None), Col("nameId"), Col("correlationId")], ops, "o.")  # what is fetched here
    parts = [f"SELECT o.correlationId AS c, o.id AS i, COALESCE(o.nameId, -1) AS n, ({ok}) AS ok FROM TRACER_OPS o "
             "WHERE o.kind IN (3, 4) AND o.correlationId IS NOT NULL"]
    if "TRACER_EXTERNAL_CORRELATION" in present:
        db.require_types("TRACER_EXTERNAL_CORRELATION", EXTERNAL)  # every row: the join drops one whose externalId is no integer
        parts.insert(0, f"SELECT e.correlationId AS c, o.id AS i, COALESCE(o.nameId, -1) AS n, ({ok}) AS ok "
                        "FROM TRACER_EXTERNAL_CORRELATION e JOIN TRACER_OPS o ON o.id = e.externalId")

    return db.fetch("TRACER_OPS", ["c", "i", "n"], "ok", f"FROM ({' UNION ALL '.join(parts)})",
                    lambda: _check_op_types(db, present))


def _sequence_numbers(db: SqliteTables, present: set[str]) -> tuple[bool, bool]:
    """Whether any op holds a seqNr / a bwdSeqNr >= 0: one scan instead of two reads that find
    nothing where autograd did not run. A value that is not an integer counts as there (SQLite's
    max puts text and BLOBs above numbers), so the read that follows reports it."""
    if "TRACER_OPS" not in present:
        return False, False
    have = db.columns("TRACER_OPS")
    cols = [c if c in have else "NULL" for c in ("seqNr", "bwdSeqNr")]
    with db.reading("TRACER_OPS"):
        row = db.con.execute(f"SELECT max({cols[0]}), max({cols[1]}) FROM TRACER_OPS").fetchone()
    return (not (row[0] is None or (isinstance(row[0], int) and row[0] < 0)),
            not (row[1] is None or (isinstance(row[1], int) and row[1] < 0)))


def _backward(db: SqliteTables, present: set[str]) -> list[np.ndarray]:
    """(launch corr, bwdSeqNr, op start) of launches inside backward ops."""
    if "TRACER_OPS" not in present:
        return [np.zeros(0, dtype=np.int64)] * 3
    ok = f"{is_integer('o.bwdSeqNr')} AND {is_integer('o.start')}"
    parts = [f"SELECT o.correlationId AS c, o.bwdSeqNr AS b, o.start AS s, {ok} AND {is_integer('o.correlationId')} AS ok "
             "FROM TRACER_OPS o WHERE o.kind = 3 AND o.bwdSeqNr >= 0 AND o.correlationId IS NOT NULL"]
    if "TRACER_EXTERNAL_CORRELATION" in present:
        parts.insert(0, f"SELECT e.correlationId AS c, o.bwdSeqNr AS b, o.start AS s, {ok} AND {is_integer('e.correlationId')} "
                        "AS ok FROM TRACER_EXTERNAL_CORRELATION e JOIN TRACER_OPS o ON o.id = e.externalId WHERE o.bwdSeqNr >= 0")

    return db.fetch("TRACER_OPS (backward ops)", ["c", "b", "s"], "ok", f"FROM ({' UNION ALL '.join(parts)})",
                    lambda: _check_op_types(db, present))


def _check_op_types(db: SqliteTables, present: set[str]) -> None:
    """Name the column of TRACER_OPS or TRACER_EXTERNAL_CORRELATION that a join of them found wrong."""
    db.check_types("TRACER_OPS", OPS)
    if "TRACER_EXTERNAL_CORRELATION" in present:
        db.check_types("TRACER_EXTERNAL_CORRELATION", EXTERNAL)


def _sorted_by(cols: list[np.ndarray], key: int) -> list[np.ndarray]:
    order = np.argsort(cols[key], kind="stable")
    return [c[order] for c in cols]


def _names(db: SqliteTables, ids: np.ndarray) -> np.ndarray:
    """StringIds ids -> Trace.strings positions, keeping -1 for none."""
    out = np.full(len(ids), -1, dtype=np.int64)
    known = ids >= 0
    out[known] = db.remap(ids[known])
    return out


def _check_accesses(db: SqliteTables, launches: list[np.ndarray]) -> None:
    address, size, mode = launches[2], launches[3], launches[4]
    real = mode != 0
    bad = real & ((address < 0) | (size < 0) | (address >= TIME_LIMIT) | (size >= TIME_LIMIT) | (address + size >= TIME_LIMIT))
    if bad.any():
        raise TraceFormatError(f"{db.path}: TRACER_MEMORY_ACCESS: {int(bad.sum())} row(s) with an impossible address or "
                               f"byte count (first: address {int(address[bad][0])}, bytes {int(size[bad][0])})")
    if (~real & (size > 0)).any():
        raise TraceFormatError(f"{db.path}: TRACER_MEMORY_ACCESS.mode holds 0 (neither read nor write) for a byte range")


def access_corr(memory: Memory, kernels: Kernels) -> np.ndarray:
    """The correlation id whose op holds each kernel's accesses: its launch's, or for a kernel
    replayed from a CUDA graph the launch that made its node (its own, the graph launch's, when
    no traced launch made the node: no op has it, the kernel has no memory set)."""
    g = memory.graph_nodes
    if kernels.graph_node is None or len(g.node) == 0:
        return kernels.corr
    at = np.clip(np.searchsorted(g.node, kernels.graph_node), 0, len(g.node) - 1)
    made = (kernels.graph_node > 0) & (g.node[at] == kernels.graph_node) & (g.corr[at] >= 0)
    return np.where(made, g.corr[at], kernels.corr)


def kernel_accesses(memory: Memory, kernel_corr: np.ndarray) -> KernelAccesses:
    """Join each kernel (by its launch's correlation id) to the accesses of its op(s)."""
    la = memory.launches
    lo = np.searchsorted(la.corr, kernel_corr, side="left")
    hi = np.searchsorted(la.corr, kernel_corr, side="right")
    n = hi - lo
    kernel = np.repeat(np.arange(len(kernel_corr), dtype=np.int64), n)
    row = expand_ranges(lo, n)
    real = la.mode[row] != 0
    return KernelAccesses(kernel[real], row[real], n > 0)
