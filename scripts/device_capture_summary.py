"""The last step of scripts/device_capture.sh: one table of what each tool found on each test
program (tracer's raw memory tables, tracer's hazard analysis when it is in the verdict JSON,
CSAN), then the DDP job, the seed workloads and the overhead benchmark.

    python scripts/device_capture_summary.py OUT_DIR
"""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "gpu"))

from memory_tables import EXPECTED, raw_verdict  # noqa: E402

HAZARDS = ("RAW", "WAR", "WAW", "reuse")


def exits(out: Path) -> dict[str, str]:
    path = out / "logs" / "exits.txt"
    pairs = [line.split() for line in path.read_text().splitlines()] if path.is_file() else []
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def verdict_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def analysis(verdict: dict) -> str:
    h = verdict.get("hazards")
    if not isinstance(h, dict) or not h.get("memory"):
        return "(no hazards in verdict)"
    c = h.get("counts", {})
    found = [f"{k} {c[k]}" for k in (*HAZARDS, "may") if c.get(k)]
    return ", ".join(found) or "none"


def csan(out: Path, name: str, codes: dict[str, str]) -> str:
    log = out / "logs" / f"csan-{name}.log"
    if not log.is_file():
        return "-"
    races = log.read_text(errors="replace").count("CSAN detected a possible data race")
    return f"{races} race(s), exit {codes.get(f'csan-{name}', '?')}"


def programs(out: Path, codes: dict[str, str]) -> None:
    print(f"{'program':<24} {'expected':<10} {'tracer raw tables':<52} {'tracer analysis':<26} CSAN")
    for name in sorted(EXPECTED) + ["gpt2_train"]:
        db = out / "traces" / f"{name}.sqlite"
        expected = (",".join(sorted(EXPECTED[name])) or "none") if name in EXPECTED else "-"
        if not db.is_file():
            raw = f"NO TRACE (exit {codes.get(f'trace-{name}', '?')})"
        elif name in EXPECTED:
            try:
                ok, seen = raw_verdict(name, db)
                raw = f"{'ok' if ok else 'MISSING'}: {seen}"
            except Exception as exc:  # a broken capture is a finding, not a crash of the summary
                raw = f"ERROR {type(exc).__name__}: {exc}"[:52]
        else:
            raw = attribution(db)
        verdict = verdict_json(out / "traces" / f"{name}.verdict.json")
        print(f"{name:<24} {expected:<10} {raw[:52]:<52} {analysis(verdict)[:26]:<26} {csan(out, name, codes)}")


def attribution(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        ops = con.execute("SELECT COUNT(*), SUM(bwdSeqNr >= 0) FROM TRACER_OPS").fetchone()
        kernels = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        con.close()
    return f"{kernels} kernels, {ops[0]} ops ({ops[1]} backward)"


def meta(db: Path) -> dict[str, str]:
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    finally:
        con.close()


def seeds_and_meta(out: Path) -> None:
    for db in sorted((out / "traces").glob("*.sqlite")):
        m = meta(db)
        notes = {k: v for k, v in m.items() if k.startswith(("TRACER_MEMORY_", "TRACER_RECORD_ERRORS", "TRACER_LAUNCH"))}
        name = db.stem
        v = verdict_json(out / "traces" / f"{name}.verdict.json")
        extra = f"unattributed {v.get('unattributed')}/{v.get('kernels')}" if v else ""
        print(f"  {name:<34} {analysis(v)[:30]:<30} {extra} {notes}")


def ddp(out: Path) -> None:
    for name in ("ddp", "ddp-killed"):
        cmd = verdict_json(out / "traces" / name / "command.json")
        procs = [(p.get("rank"), p.get("state"), p.get("ended"), p.get("kernels")) for p in cmd.get("processes", [])]
        print(f"  {name}: exit {cmd.get('exit')} job {cmd.get('job')} processes (rank, state, ended, kernels) {procs} "
              f"untraced {[u.get('comm') for u in cmd.get('untraced', [])]}")
    for name in ("ddp-untraced", "ddp-traced"):
        log = out / "logs" / f"{name}.log"
        walls = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("wall")] if log.is_file() else []
        print(f"  {name}: {walls}")


def bench(out: Path) -> None:
    data = verdict_json(out / "bench_memory_capture.json")
    if not data:
        print("  no benchmark result")
        return
    if data.get("partial"):
        print("  cut off; runs so far:", [(r["mode"], r["seconds"], r["exit"]) for r in data["runs"]])
        return
    print("  median s:", {k: round(v, 2) for k, v in data["median_s"].items()})
    print("  ratios:", {k: round(v, 2) for k, v in data["ratios"].items()})


def main() -> int:
    out = Path(sys.argv[1])
    codes = exits(out)
    print("== programs: what each tool finds")
    programs(out, codes)
    print("== every trace: hazards analysis, capture counters")
    seeds_and_meta(out)
    print("== torchrun DDP (2 ranks)")
    ddp(out)
    print("== capture overhead (linear_backward)")
    bench(out)
    failed = {k: v for k, v in codes.items() if v != "0" and not k.startswith("csan-")}
    print("== steps with a non-zero exit:", failed or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
