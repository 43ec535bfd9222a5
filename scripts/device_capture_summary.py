"""The last step of scripts/device_capture.sh: what each step left under OUT_DIR, as text: the
test programs (tracer's raw memory tables, its hazard analysis when in the verdict JSON, CSAN),
the torchrun runs (each process's outcome; NCCL kernels, their streams and event edges), and the
two overhead benchmarks with where the time went.

    python scripts/device_capture_summary.py OUT_DIR
"""
from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
sys.path.insert(0, str(ROOT / "scripts"))

from memory_tables import EXPECTED, raw_verdict

HAZARDS = ("RAW", "WAR", "WAW", "reuse")


def exits(out: Path) -> dict[str, str]:
    path = out / "logs" / "exits.txt"
    pairs = [line.split() for line in path.read_text().splitlines()] if path.is_file() else []
    return {p[0]: p[1] for p in pairs if len(p) >= 2}  # name, exit status[, seconds]


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


def job(out: Path, name: str) -> None:
    """A traced torchrun run: how each process ended, and (several GPUs) the NCCL streams."""
    folder = out / "traces" / name
    cmd = verdict_json(folder / "command.json")
    if not cmd:
        print(f"  {name}: no command.json")
        return
    print(f"  {name}: exit {cmd.get('exit')} job {cmd.get('job')} untraced {[u.get('comm') for u in cmd.get('untraced', [])]}")
    for p in cmd.get("processes", []):
        marker = verdict_json(folder / f"{p['file']}.json")
        t = marker.get("timing", {})
        print(f"    {p['file']:<22} rank {p.get('rank')!s:<5} {p.get('state')!s:<8} ended {p.get('ended')!s:<9} "
              f"exit {p.get('exit')!s:<5} {p.get('outcome')!s:<13} kernels {p.get('kernels')!s:<6} "
              f"cupti by {marker.get('cupti_started_by')!s:<18} exit_total {t.get('phases_s', {}).get('exit_total')} "
              f"periodic_flush {t.get('phases_s', {}).get('periodic_flush')} sync_flush {t.get('phases_s', {}).get('sync_flush')} "
              f"kernels flushed before exit {marker.get('flushed_kernels')}"
              + (f" TRACE ERROR {p['trace_error']}" if p.get("trace_error") else ""))
        db = folder / f"{p['file']}.sqlite"
        if db.is_file() and p.get("kernels"):
            print(f"      {nccl_streams(db)}")
        if db.is_file():
            left = {k: v for k, v in meta(db).items() if k.startswith("TRACER_LEFT_OUT_")}
            print(f"      left out: {left}" if left else "      nothing left out")
    log = out / "logs" / f"{name}.log"
    if log.is_file():
        print("    " + " | ".join(process_lines(log.read_text(errors="replace"))[-8:]))


def process_lines(text: str) -> list[str]:
    """What `trace run` said about the processes: its `tracer:` lines and the indented lines
    under `processes (N):`."""
    out, listing = [], False
    for line in text.splitlines():
        if line.startswith("processes ("):
            listing = True
        elif listing and not line.startswith("  "):
            listing = False
        if listing or line.startswith("tracer:"):
            out.append(line.strip())
    return out


def nccl_streams(db: Path) -> str:
    """NCCL kernels' streams, compute streams, and event edges (record on one, wait on another)."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT s.value, k.streamId FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName").fetchall()
        records = con.execute("SELECT eventSyncId, streamId FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT").fetchall()
        waits = con.execute("SELECT eventSyncId, streamId FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION WHERE syncType = 2").fetchall()
        partial = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT")).get("TRACER_PARTIAL")
    finally:
        con.close()
    nccl = {st for n, st in rows if "nccl" in n.lower()}
    compute = {st for n, st in rows if "nccl" not in n.lower()}
    recorded = dict(records)
    edges = {(recorded[e], st) for e, st in waits if e in recorded and recorded[e] != st}
    cross = {(a, b) for a, b in edges if (a in nccl) != (b in nccl)}
    return (f"nccl streams {sorted(nccl)} ({sum('nccl' in n.lower() for n, _ in rows)} kernels), compute streams "
            f"{sorted(compute)}, event edges {sorted(edges)[:8]}, nccl<->compute edges {len(cross)}"
            + (f", PARTIAL: {partial}" if partial else ""))


def ddp_bench(out: Path) -> None:
    from bench_ddp_capture import medians, split

    data = verdict_json(out / "bench_ddp_capture.json")
    runs = data.get("runs", [])
    if not any(r.get("mode") == "traced" and "command_s" in r for r in runs) or not any(r.get("mode") == "untraced" for r in runs):
        print("  no DDP benchmark result", [(r.get("mode"), round(r.get("seconds", 0), 2)) for r in runs])
        return
    m = medians(runs)  # also from a run cut off at the deadline
    print(f"  {'(cut off) ' if data.get('partial') else ''}untraced {m['untraced_s']:.2f} s, traced {m['traced_s']:.2f} s "
          f"({m.get('traced/untraced', 0):.3f}x), traced command alone {m['traced_command_s']:.2f} s "
          f"({m.get('command/untraced', 0):.3f}x), repeats {sum(r.get('mode') == 'traced' for r in runs)}")
    if m.get("paired_ratios"):
        r = m["paired_ratios"]
        print(f"  traced/untraced per repeat: median {m['paired_median']:.3f}x, from {min(r):.3f} to {max(r):.3f}")
    print(f"  {split(m)}")
    for k, row in m.get("per_process", {}).items():
        print(f"    {k:<8} " + " ".join(f"{c} {v:.3f}" for c, v in row.items()))


def bench(out: Path) -> None:
    from bench_memory_capture import ratios, table

    data = verdict_json(out / "bench_memory_capture.json")
    runs = data.get("runs", [])
    if not runs:
        print("  no benchmark result")
        return
    modes = list(dict.fromkeys(r["mode"] for r in runs))
    rows = table(runs, modes)  # also from a run cut off at the deadline
    if data.get("partial"):
        print(f"  (cut off after {len(runs)} runs)")
    for mode, row in rows.items():
        print(f"  {mode:<22} " + " ".join(f"{k} {v:.3f}" for k, v in row.items() if v and not k.endswith("_calls")))
        calls = {k[:-6]: int(v) for k, v in row.items() if k.endswith("_calls") and v}
        if calls:
            print(f"  {'':<22} hook calls {calls}")
    print("  ratios:", {k: round(v, 2) for k, v in ratios(rows).items()})


def section(title: str, show: Callable[..., None], *args: object) -> bool:
    """One section; a failure in it is one line, and the other sections still print."""
    print(f"== {title}")
    try:
        show(*args)
    except Exception as exc:  # whatever a step left, the summary goes on
        print(f"  SUMMARY ERROR in {title}: {type(exc).__name__}: {exc}"[:300])
        return False
    return True


def main() -> int:
    out = Path(sys.argv[1])
    codes = exits(out)
    print("== plan:", (out / "logs" / "plan.txt").read_text().strip() if (out / "logs" / "plan.txt").is_file() else "?")
    ok = True
    if any(k.startswith("trace-") for k in codes):
        ok &= section("programs: what each tool finds", programs, out, codes)
        ok &= section("every trace: hazards analysis, capture counters", seeds_and_meta, out)
    for name in ("ddp-killed", "ddp-nccl"):
        if (out / "traces" / name).is_dir():
            ok &= section(f"torchrun {name}", job, out, name)
    ok &= section("capture overhead (linear_backward): wall, workload (in-process), fixed, phases and hooks (s)", bench, out)
    ok &= section("torchrun DDP overhead", ddp_bench, out)
    failed = {k: v for k, v in codes.items() if v != "0" and not k.startswith("csan-")}
    print("== steps with a non-zero exit:", failed or "none")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
