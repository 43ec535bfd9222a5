"""Merge two real single-process SQLite traces (nsys exports or tracer captures, same schema) into
one export of two processes, as `nsys profile` of a launcher that starts both would write it:

  python scripts/merge_nsys_processes.py A.sqlite B.sqlite OUT.sqlite [--pid 4242]

B's rows keep their stream ids, correlation ids and eventSyncIds (so both processes have a
"stream 7", a correlation id 12 and an event 1, as real processes do); its globalPid/globalTid
get process id --pid (the thread part of its main thread too), its StringIds ids move past A's,
and its times shift so that its first kernel starts with A's (two processes running together).
META_DATA_EXPORT, ENUM_* and TRACER_* tables come from A alone (memory access tables are refused:
tracer captures one process per file).
"""
from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
from pathlib import Path

STRING_COLS = {"demangledName", "shortName", "mangledName", "nameId", "textId"}
TIME_COLS = {"start", "end", "timestamp"}
PID_MASK = 0xFFFFFF << 24


def columns(con: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA {schema}.table_info({table})")]


def tables(con: sqlite3.Connection, schema: str) -> list[str]:
    return [r[0] for r in con.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type='table'")]


def expr(col: str, old_pid: int, pid: int, string_shift: int, time_shift: int) -> str:
    """B's column as it goes into the merged file."""
    if col == "globalPid":
        return f"(({col} & ~{PID_MASK}) | ({pid} << 24))"
    if col in ("globalTid", "endGlobalTid"):
        tid = f"CASE WHEN ({col} & 16777215) = {old_pid} THEN {pid} ELSE ({col} & 16777215) END"
        return f"(({col} & ~{(1 << 48) - 1}) | ({pid} << 24) | {tid})"
    if col == "processId":
        return str(pid)
    if col in STRING_COLS:
        return f"({col} + {string_shift})"
    if col in TIME_COLS:
        return f"CASE WHEN {col} >= 0 THEN {col} + {time_shift} ELSE {col} END"
    return col


def merge(a: Path, b: Path, out: Path, pid: int) -> None:
    tmp = out.with_name(out.name + ".tmp")
    shutil.copyfile(a, tmp)
    con = sqlite3.connect(tmp)
    try:
        con.execute("ATTACH DATABASE ? AS b", (str(b),))
        if any(t.startswith("TRACER_") for t in tables(con, "b")):
            raise SystemExit(f"{b}: holds memory access tables (TRACER_*): merge traces captured without --memory")
        old_pid = con.execute("SELECT globalPid >> 24 & 16777215 FROM b.CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
        string_shift = con.execute("SELECT IFNULL(max(id), -1) + 1 FROM main.StringIds").fetchone()[0]
        a0 = con.execute("SELECT min(start) FROM main.CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        b0 = con.execute("SELECT min(start) FROM b.CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        mine = set(tables(con, "main"))
        for table in tables(con, "b"):
            if table == "META_DATA_EXPORT" or table.startswith("ENUM_"):
                continue
            if table == "StringIds":
                con.execute(f"INSERT INTO main.StringIds (id, value) SELECT id + {string_shift}, value FROM b.StringIds")
                continue
            if table not in mine:
                sql = con.execute("SELECT sql FROM b.sqlite_master WHERE name = ?", (table,)).fetchone()[0]
                con.execute(sql)
            cols = [c for c in columns(con, "b", table) if c in set(columns(con, "main", table))]
            picked = ", ".join(expr(c, old_pid, pid, string_shift, a0 - b0) for c in cols)
            con.execute(f"INSERT INTO main.{table} ({', '.join(cols)}) SELECT {picked} FROM b.{table}")
        con.commit()
    finally:
        con.close()
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--pid", type=int, default=4242, help="process id B's rows get (default 4242)")
    args = ap.parse_args(argv)
    merge(args.a, args.b, args.out, args.pid)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
