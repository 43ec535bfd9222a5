"""Nsight Systems captures for tests/data/nsys/: `tracer trace run --backend nsys` on the seed
workloads and the torch programs of tests/gpu/programs (two streams with events, a capture
range, two processes on one GPU), and `tracer trace import` of one of its .nsys-rep reports.

The CUPTI twins (cupti_*.sqlite: `--backend cupti --memory` on the same programs) are there for
the side-by-side tests. Run on a GPU machine where nsys writes reports (`tracer doctor`,
`tracer doctor --fix-nsys`):
    python scripts/capture_nsys_fixtures.py OUT [--runs DIR] [--only NAME,...]
--runs DIR: take the captures scripts/bench_nsys_vs_cupti.py already made in DIR/runs (the same
commands) instead of making them again. Writes OUT/<name>.sqlite and OUT/captures.json (the
command, exit, seconds, nsys version, kernels and size of each). Each fixture is scrubbed of what
an export records about the machine (the target's environment, host name, absolute paths in any
text column: `scrub`); the tables tracer reads keep every row.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "gpu" / "programs"
SEED = ["--shape", "1024x1024x1024", "--steps", "2"]
TRAIN = ["--", sys.executable, str(PROGRAMS / "nsys_train.py")]
NSYS = ["--backend", "nsys"]
CUPTI = ["--backend", "cupti", "--memory"]  # the twins: the same programs under the CUPTI backend
# fixture: (the bench's run directory that holds the same capture, `trace run` arguments)
TARGETS = {
    "event_ordered_dgrad": ("event_ordered_dgrad-nsys", [*NSYS, "--cuda-event-trace", "event_ordered_dgrad", *SEED]),
    "event_ordered_dgrad_no_event_trace": (None, [*NSYS, "event_ordered_dgrad", *SEED]),
    "planted_cross_stream": ("planted_cross_stream-nsys", [*NSYS, "--cuda-event-trace", "planted_cross_stream", *SEED]),
    "nsys_train": ("nsys_train-nsys", [*NSYS, "--cuda-event-trace", "--pairs", "all", *TRAIN]),
    "nsys_train_range": (None, [*NSYS, "--cuda-event-trace", "--capture-range", "profile", "--pairs", "all", *TRAIN]),
    "nsys_two_procs": ("nsys_two_procs-nsys", [*NSYS, "--cuda-event-trace", "--pairs", "all", "--", sys.executable,
                                               str(PROGRAMS / "nsys_two_procs.py")]),
    "cupti_event_ordered_dgrad": ("event_ordered_dgrad-cupti", [*CUPTI, "event_ordered_dgrad", *SEED]),
    "cupti_planted_cross_stream": ("planted_cross_stream-cupti", [*CUPTI, "planted_cross_stream", *SEED]),
    "cupti_nsys_train": ("nsys_train-cupti", [*CUPTI, "--pairs", "all", *TRAIN]),
}


def trace_run(run_dir: Path, args: list[str], timeout: float) -> dict[str, object]:
    argv = [sys.executable, "-m", "tracer", "trace", "run", "-o", str(run_dir), *args]  # -o before a `--`
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    (run_dir.parent / f"{run_dir.name}.log").write_text(res.stdout + res.stderr)
    return {"argv": shown([*argv[3:5], *args]), "exit": res.returncode, "seconds": round(time.perf_counter() - t0, 1)}


def shown(argv: list[str]) -> list[str]:
    """argv as the docs show it: `python` and paths from the repository's root."""
    return ["python" if a == sys.executable else a.replace(f"{ROOT}/", "") for a in argv]


PATH = re.compile(r"(?<![\w.<>])/(?:root|work|tmp|opt|usr|home|etc|var|proc|dev)\b(?:/[^\s\"';:,=]*)?")
# What an nsys export says about the machine that tracer never reads: the target's environment (also
# as NUL-separated blocks in StringIds), the device environment, install folders, host name.
DROPPED = {"META_DATA_CAPTURE": "name LIKE '%ENVIRONMENT_VARIABLE%'",
           "TARGET_INFO_SYSTEM_ENV": "name IN ('DeviceEnvironment', 'Hostname', 'TargetInstallDir', 'SystemUID')"}


def scrub(db: Path) -> int:
    """Machine paths in every text column become <path>; the rows of DROPPED go; the file is
    vacuumed. Returns the number of values changed. Kernels, ranges, syncs and their strings stay."""
    con = sqlite3.connect(db)
    changed = 0
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table, where in DROPPED.items():
            if table in tables:
                changed += con.execute(f"DELETE FROM {table} WHERE {where}").rowcount
        for table in tables:
            for col in [r[1] for r in con.execute(f"PRAGMA table_info({table})")]:
                rows = con.execute(f'SELECT rowid, "{col}" FROM {table} WHERE typeof("{col}") = \'text\'').fetchall()
                new = [(_scrubbed(v), rid) for rid, v in rows if PATH.search(v) or "\0" in v]
                con.executemany(f'UPDATE {table} SET "{col}" = ? WHERE rowid = ?', new)
                changed += len(new)
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    return changed


def _scrubbed(value: str) -> str:
    """An environment block (NUL-separated NAME=value strings) goes whole; paths become <path>."""
    return "<environment>" if "\0" in value else PATH.sub("<path>", value)


def describe(db: Path) -> dict[str, object]:
    con = sqlite3.connect(db)
    try:
        meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
        kernels, procs = con.execute("SELECT count(*), count(DISTINCT globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    finally:
        con.close()
    made_by = "tracer" if "TRACER_PRODUCER" in meta else "nsys"  # a CUPTI twin, or an nsys export
    return {made_by: meta.get("EXPORT_PRODUCT_VERSION"), "schema": meta.get("EXPORT_SCHEMA_VERSION"),
            "kernels": kernels, "processes": procs, "bytes": db.stat().st_size}


def import_report(out: Path, runs: Path, timeout: float) -> dict[str, object]:
    """`tracer trace import` of a copy of nsys_train's .nsys-rep (no .sqlite beside it: nsys exports it)."""
    rep = next(runs.glob("nsys_train*/trace.nsys-rep"), None)
    if rep is None:
        return {"error": "no nsys_train report to import"}
    folder = out / "import"
    folder.mkdir(exist_ok=True)
    copy = folder / "nsys_train.nsys-rep"
    shutil.copyfile(rep, copy)
    argv = [sys.executable, "-m", "tracer", "trace", "import", str(copy), "-o", str(folder / "run"), "--json"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    (folder / "import.log").write_text(res.stdout + res.stderr)
    verdict = json.loads(res.stdout) if res.returncode == 0 else {}
    return {"exit": res.returncode, "kernels": verdict.get("kernels"), "report_bytes": copy.stat().st_size}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--runs", type=Path, help="the bench's output folder, whose runs/ to reuse")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--only", help="comma-separated fixtures (default: all); captures.json keeps the others' entries")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = (args.runs or args.out) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    old = args.out / "captures.json"
    summary: dict[str, object] = json.loads(old.read_text()) if args.only and old.is_file() else {}
    names = args.only.split(",") if args.only else list(TARGETS)
    for name in names:
        bench_dir, targs = TARGETS[name]
        run_dir = runs / (bench_dir or name)
        made = trace_run(run_dir, targs, args.timeout) if not (run_dir / "trace.sqlite").is_file() else {
            "argv": shown(["trace", "run", *targs]), "from": "bench"}
        db = run_dir / "trace.sqlite"
        if db.is_file():
            fixture = args.out / f"{name}.sqlite"
            shutil.copyfile(db, fixture)
            made |= {"scrubbed_values": scrub(fixture)} | describe(fixture)
        summary[name] = made
        print(name, json.dumps(made), flush=True)
    if not args.only:
        summary["import"] = import_report(args.out, runs, args.timeout)
        print("import", json.dumps(summary["import"]), flush=True)
    (args.out / "captures.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
