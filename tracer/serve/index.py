"""The run index: every run under the served folders, summarised once (tracer.app.runs) and kept
current by rescans that re-read only runs whose result files changed (a signature of their sizes
and times), and drop runs that are gone. Queried for the run list: filter, sort, paging."""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracer.app.runs import RunKind, Status, discover_listed, headline, inside, summarize
from tracer.errors import UsageError, unknown
from tracer.serve.db import Db, NotFound

SORTS = {"created": "created", "kind": "kind", "status": "status", "path": "path", "id": "id"}
MAX_PAGE = 500
BATCH = 500
BIG_TRACE_BYTES = 8 << 20  # traces at least this big get their timeline lanes built after a scan


@dataclass(frozen=True, kw_only=True)
class ScanResult:
    runs: int
    read: int  # summarised again (new or changed)
    removed: int
    seconds: float
    big: tuple[str, ...] = ()  # run folders whose trace.sqlite is at least BIG_TRACE_BYTES


def signature(files: dict[str, os.stat_result]) -> str:
    """Sizes and mtimes of what a summary reads: unchanged signature, unchanged summary."""
    return "|".join(f"{n}:{st.st_size}:{st.st_mtime_ns}" for n, st in sorted(files.items()))


class RunIndex:
    def __init__(self, db: Db, roots: Sequence[Path]) -> None:
        self.db, self.roots = db, tuple(r.resolve() for r in roots)

    def scan(self) -> ScanResult:
        import time

        t0 = time.monotonic()
        known = {p: (i, s) for i, p, s in self.db.query("SELECT id, path, sig FROM runs")}
        seen: set[str] = set()
        pending: list[tuple[str, str, dict[str, os.stat_result]]] = []
        read = 0
        big: list[str] = []
        for path, files in discover_listed(self.roots):
            key, sig = str(path), signature(files)
            seen.add(key)
            if "trace.sqlite" in files and files["trace.sqlite"].st_size >= BIG_TRACE_BYTES:
                big.append(key)
            if key in known and known[key][1] == sig:
                continue
            pending.append((key, sig, files))
            if len(pending) >= BATCH:
                read += self._store(pending)
                pending = []
        read += self._store(pending)
        gone = [i for p, (i, _) in known.items() if p not in seen]
        with self.db.tx() as con:
            con.executemany("DELETE FROM runs WHERE id=?", [(i,) for i in gone])
        return ScanResult(runs=len(seen), read=read, removed=len(gone), seconds=time.monotonic() - t0, big=tuple(big))

    def _store(self, pending: list[tuple[str, str, dict[str, os.stat_result]]]) -> int:
        rows = []
        for key, sig, files in pending:
            s = summarize(Path(key), files)
            rows.append((key, s.kind.value, s.created, s.command, s.device, s.status.value, json.dumps(s.counts),
                         json.dumps(list(s.tags)), s.error, sig))
        with self.db.tx() as con:
            con.executemany(
                "INSERT INTO runs (path, kind, created, command, device, status, counts, tags, error, sig) "
                "VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(path) DO UPDATE SET kind=excluded.kind, "
                "created=excluded.created, command=excluded.command, device=excluded.device, status=excluded.status, "
                "counts=excluded.counts, tags=excluded.tags, error=excluded.error, sig=excluded.sig", rows)
        return len(rows)

    def list(self, *, kind: str | None = None, status: str | None = None, text: str | None = None,
             sort: str = "created", order: str = "desc", offset: int = 0, limit: int = 50) -> tuple[int, list[dict[str, Any]]]:
        where, params = [], []
        if kind:
            if kind not in [k.value for k in RunKind]:
                raise unknown("kind", kind, [k.value for k in RunKind])
            where.append("kind=?")
            params.append(kind)
        if status:
            if status not in [s.value for s in Status]:
                raise unknown("status", status, [s.value for s in Status])
            where.append("status=?")
            params.append(status)
        if text:
            like = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where.append("(path LIKE ? ESCAPE '\\' OR command LIKE ? ESCAPE '\\' OR tags LIKE ? ESCAPE '\\' OR device LIKE ? ESCAPE '\\')")
            params += [like] * 4
        if sort not in SORTS:
            raise unknown("sort", sort, list(SORTS))
        if order not in ("asc", "desc"):
            raise unknown("order", order, ["asc", "desc"])
        if not (0 <= offset and 1 <= limit <= MAX_PAGE):
            raise UsageError(f"offset {offset} must be >= 0 and limit {limit} in 1..{MAX_PAGE}")
        cond = f"WHERE {' AND '.join(where)}" if where else ""
        total = self.db.query(f"SELECT count(*) FROM runs {cond}", params)[0][0]
        rows = self.db.query(f"SELECT id, path, kind, created, command, device, status, counts, tags, error FROM runs {cond} "
                             f"ORDER BY {SORTS[sort]} {order}, id {order} LIMIT ? OFFSET ?", [*params, limit, offset])
        return int(total), [self._row(r) for r in rows]

    def _row(self, r: tuple[Any, ...]) -> dict[str, Any]:
        path = Path(r[1])
        root = next((x for x in self.roots if path == x or path.is_relative_to(x)), None)
        summary = json.loads(r[7])
        return {"id": r[0], "path": str(path.relative_to(root)) if root and path != root else path.name,
                "kind": r[2], "created": r[3], "command": r[4], "device": r[5], "status": r[6],
                "summary": summary, "headline": r[9] or headline(r[2], summary), "tags": json.loads(r[8]), "error": r[9]}

    def get(self, run_id: int) -> tuple[Path, dict[str, Any]]:
        """The run's path (checked again to lie inside the served folders) and its list row."""
        rows = self.db.query("SELECT id, path, kind, created, command, device, status, counts, tags, error FROM runs "
                             "WHERE id=?", (run_id,))
        if not rows:
            raise NotFound(f"no run {run_id}")
        return inside(self.roots, Path(rows[0][1])), self._row(rows[0])
