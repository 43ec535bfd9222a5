"""Reading the raw TRACER_* tables of a `trace run --memory` capture, for the GPU tests and the
device summary (scripts/device_capture.sh): which kernels touched which bytes, and the pairs of
kernels on different streams inside one NVTX range whose ranges overlap with a write. No
happens-before here (that is the analysis, tracer.analysis): a raw overlap is a candidate, ordered
or not. The expected verdict of each test program (tests/gpu/programs/) lives here too."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple

PROGRAMS = Path(__file__).resolve().parent / "programs"
# program -> hazard kinds the analysis must report (empty: none); "may" programs have guessed directions
EXPECTED: dict[str, frozenset[str]] = {
    "event_ordered": frozenset(), "raw_no_wait": frozenset({"RAW"}), "war": frozenset({"WAR"}),
    "waw": frozenset({"WAW"}), "host_sync": frozenset(), "same_stream": frozenset(),
    "reuse_no_record_stream": frozenset({"reuse"}), "reuse_record_stream": frozenset(),
    "cuda_core_no_wait": frozenset({"RAW"}), "triton_no_wait": frozenset({"RAW"}),
    "inplace_view_overlap": frozenset({"WAW"}), "inplace_disjoint": frozenset(),
    "compiled_no_wait": frozenset({"RAW"}), "graph_no_wait": frozenset({"RAW"}),
}
MAY = {"cuda_core_no_wait", "triton_no_wait", "compiled_no_wait"}
# Issue #26's programs (copies, memsets, CUDA graphs): judged by the analysis itself, the hazard kinds it
# must report and nothing else, each race found in every iteration or replay (`per`: how many times)
OPS_EXPECTED: dict[str, dict[str, int]] = {
    "ops_h2d_no_wait": {"RAW": 2}, "ops_h2d_wait_stream": {}, "ops_prefetch": {}, "ops_d2d_no_wait": {"RAW": 2},
    "ops_zero_war": {"WAR": 2}, "ops_d2h_pinned_waw": {"WAW": 1}, "ops_driver_copies": {"RAW": 3, "WAR": 1},
    "ops_graph_branches": {"RAW": 3}, "ops_graph_edge": {}, "ops_graph_written_stream": {"RAW": 2},
    "ops_copy3d": {"RAW": 2}, "collective_no_wait": {"RAW": 3}, "collective_ddp": {},
}
# Races between operations nothing orders in either direction (two branches of one graph launch): the
# operation that started first is the producer, so a read-write race is RAW or WAR as the GPU ran it.
OPS_EITHER = {"ops_graph_branches": ("RAW", "WAR")}
OPS_MAY = {"ops_driver_copies": 1, "ops_copy3d": 2}  # the pitched 2D and 3D copies: their rows' gaps are counted in


class Access(NamedTuple):
    corr: int
    stream: int
    kernel: str
    launch: int  # launch API start (submission order)
    address: int
    bytes: int
    mode: int
    exact: int
    allocation: int
    source: int  # allocation source: 1 torch storage, 2 cudaMalloc, 0 unknown
    op_kind: int


def meta(db: Path) -> dict[str, str]:
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    finally:
        con.close()


def kernel_accesses(db: Path) -> list[Access]:
    """Every kernel's accesses: through the external correlation of its launch (ops of kind 1
    and 2) or the launch's own correlation id (kind 3); a kernel replayed from a CUDA graph through
    the launch that made its graph node at capture (clones followed back to it)."""
    con = sqlite3.connect(db)
    try:
        graphs = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'TRACER_GRAPH_NODES'").fetchone()
        made = """, chain(node, at, depth) AS (SELECT nodeId, nodeId, 0 FROM TRACER_GRAPH_NODES
                     UNION ALL SELECT c.node, g.originalNodeId, c.depth + 1 FROM chain c JOIN TRACER_GRAPH_NODES g
                     ON g.nodeId = c.at WHERE g.originalNodeId >= 0 AND c.depth < 16),
                  made AS (SELECT c.node AS node, MIN(g.correlationId) AS corr FROM chain c
                     JOIN TRACER_GRAPH_NODES g ON g.nodeId = c.at WHERE g.correlationId >= 0 GROUP BY c.node)""" \
            if graphs else ", made AS (SELECT 0 AS node, 0 AS corr WHERE 0)"
        rows = con.execute(f"""
            WITH RECURSIVE ops AS (SELECT e.correlationId AS corr, e.externalId AS op FROM TRACER_EXTERNAL_CORRELATION e
                         UNION SELECT correlationId, id FROM TRACER_OPS WHERE kind = 3){made}
            SELECT k.correlationId, k.streamId, s.value, COALESCE(r.start, k.start), a.address, a.bytes, a.mode, a.exact,
                   a.allocationId, COALESCE(al.source, 0), o.kind
            FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
            LEFT JOIN made m ON k.graphNodeId > 0 AND m.node = k.graphNodeId
            JOIN ops ON ops.corr = COALESCE(m.corr, k.correlationId) JOIN TRACER_OPS o ON o.id = ops.op
            JOIN TRACER_MEMORY_ACCESS a ON a.opId = ops.op
            LEFT JOIN TRACER_ALLOCATIONS al ON al.id = a.allocationId
            LEFT JOIN (SELECT correlationId, MIN(start) AS start FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY correlationId) r
                   ON r.correlationId = k.correlationId""").fetchall()
    finally:
        con.close()
    return [Access(*r) for r in rows]


def range_window(db: Path, name: str) -> tuple[int, int]:
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text = ? ORDER BY start LIMIT 1", (name,)).fetchone()
    finally:
        con.close()
    if row is None:
        raise AssertionError(f"{db}: no NVTX range {name!r}")
    return row[0], row[1]


def kind(p: Access, c: Access) -> str:
    if p.allocation != c.allocation and p.source == c.source == 1:
        return "reuse"
    if p.mode & 2 and c.mode & 1:
        return "RAW"
    return "WAR" if c.mode & 2 and not p.mode & 2 else "WAW"


def overlaps(accesses: list[Access], window: tuple[int, int]) -> list[tuple[str, Access, Access]]:
    """(kind, producer, consumer) for kernels launched inside window on different streams whose
    byte ranges overlap, at least one writing; the producer was launched first."""
    inside = sorted((a for a in accesses if window[0] <= a.launch <= window[1]), key=lambda a: a.launch)
    out = []
    for i, p in enumerate(inside):
        for c in inside[i + 1:]:
            if c.stream != p.stream and c.corr != p.corr and (p.mode | c.mode) & 2 and \
                    p.address < c.address + c.bytes and c.address < p.address + p.bytes:
                out.append((kind(p, c), p, c))
    return out


def successful_host_queries(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM TRACER_HOST_QUERIES").fetchone()[0]
    finally:
        con.close()


def raw_verdict(name: str, db: Path) -> tuple[bool, str]:
    """Does the raw capture hold what the program's verdict needs? (ok, what was seen)"""
    found = overlaps(kernel_accesses(db), range_window(db, "step0"))
    kinds = sorted({k for k, _, _ in found})
    seen = f"{len(found)} cross-stream overlaps in step0 {kinds}"
    want = EXPECTED[name]
    if want:
        hits = [(k, p, c) for k, p, c in found if k in want]
        if name in MAY:
            hits = [(k, p, c) for k, p, c in hits if c.op_kind == 3 and c.exact == 0]
        return bool(hits), seen
    if name in ("same_stream", "inplace_disjoint"):
        return not found, seen
    if name == "reuse_record_stream":
        reused = [x for x in found if x[0] == "reuse"]
        return not reused or successful_host_queries(db) > 0, seen + f", {successful_host_queries(db)} host queries"
    return bool(found), seen  # ordered programs: the overlap is there, the analysis must find the order
