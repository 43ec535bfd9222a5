"""The Nsight Systems backend side by side with the CUPTI backend, on the same workloads, in one run.

For each workload: the command untraced, `tracer trace run --backend cupti --memory` and
`tracer trace run --backend nsys --cuda-event-trace`, one after another, with the same pairs
(the profile's for the seed workloads, `--pairs all` for the torch programs). Per run: the wall
seconds of the whole `trace run` (capture, export, analysis) against the untraced command, the
kernel count, NVTX ranges, unattributed kernels, ordering verdict counts, event edges, whether
hazards were judged (and what the verdict says when they were not), and the trace files' sizes.
The run directories stay under OUT/runs (scripts/capture_nsys_fixtures.py takes fixtures from them).

Run on a GPU machine where nsys writes reports (`tracer doctor`):
    python scripts/bench_nsys_vs_cupti.py OUT [--only NAME,...] [--timeout 120]
Writes OUT/bench.json and prints the table for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "gpu" / "programs"
SEED = ["--shape", "1024x1024x1024", "--steps", "2"]
# name: (trace run's target arguments, the untraced command, pairs options)
WORKLOADS = {
    "event_ordered_dgrad": (["event_ordered_dgrad", *SEED], None, []),
    "planted_cross_stream": (["planted_cross_stream", *SEED], None, []),
    "cast_transpose_dgrad": (["cast_transpose_dgrad", *SEED], None, []),
    "nsys_train": (None, [sys.executable, str(PROGRAMS / "nsys_train.py")], ["--pairs", "all"]),
    "nsys_two_procs": (None, [sys.executable, str(PROGRAMS / "nsys_two_procs.py")], ["--pairs", "all"]),
}
MODES = {"cupti": ["--backend", "cupti", "--memory"], "nsys": ["--backend", "nsys", "--cuda-event-trace"]}


def untraced_argv(name: str) -> list[str]:
    target, program, _ = WORKLOADS[name]
    return program if program is not None else [sys.executable, "-m", "tracer", "run", *target, "--no-fail-on-check"]


def trace_argv(name: str, mode: str, run_dir: Path) -> list[str]:
    target, program, pairs = WORKLOADS[name]
    head = [sys.executable, "-m", "tracer", "trace", "run", *MODES[mode], "-o", str(run_dir), *pairs, "--json"]
    return head + (target if target is not None else ["--", *program])


def timed(argv: list[str], timeout: float, log: Path) -> tuple[int | None, float]:
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        try:
            code: int | None = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = None
    return code, time.perf_counter() - t0


def summarize(run_dir: Path) -> dict[str, object]:
    """What the verdict says, as the table compares it; {} when the run left no verdict."""
    verdict = run_dir / "verdict.json"
    if not verdict.is_file():
        return {}
    v = json.loads(verdict.read_text())
    hz = v.get("hazards") or {}
    files = {p.name: p.stat().st_size for p in sorted(run_dir.rglob("*")) if p.is_file()
             and (p.suffix in (".sqlite", ".nsys-rep"))}
    return {"kind": v.get("kind", "trace"), "producer": v.get("producer"), "kernels": v.get("kernels"),
            "streams": len(v.get("streams", [])), "nvtx_ranges": v.get("nvtx_ranges"),
            "unattributed": v.get("unattributed"), "attribution_rules": v.get("attribution_rules"),
            "pair_counts": v.get("pair_counts"), "event_records": v.get("event_records"),
            "event_edges": v.get("event_edges"), "unmatched_waits": v.get("unmatched_waits"),
            "hazards": {"memory": hz.get("memory"), "note": hz.get("note"), "counts": hz.get("counts")},
            "trace_bytes": sum(files.values()), "files": files}


def bench(names: list[str], out: Path, timeout: float) -> list[dict[str, object]]:
    rows = []
    for name in names:
        logs = out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        code, base = timed(untraced_argv(name), timeout, logs / f"{name}-untraced.log")
        row: dict[str, object] = {"workload": name, "untraced": {"exit": code, "seconds": round(base, 2)}}
        for mode in MODES:
            run_dir = out / "runs" / f"{name}-{mode}"
            code, secs = timed(trace_argv(name, mode, run_dir), timeout, logs / f"{name}-{mode}.log")
            row[mode] = {"exit": code, "seconds": round(secs, 2), "overhead": round(secs / base, 2) if base else None,
                         **summarize(run_dir)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _pairs(counts: object) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v) if isinstance(counts, dict) and counts else "-"


def _hazards(r: dict) -> str:
    hz = r.get("hazards") or {}
    if not hz.get("memory"):
        return "not judged: no memory access sets"
    counts = hz.get("counts") or {}
    return "judged: " + (", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none")


def table(rows: list[dict]) -> str:
    head = ("| workload | backend | exit | wall s (x untraced) | kernels | NVTX ranges | unattributed | "
            "ordering verdicts | event edges | hazards | trace files |")
    lines = [head, "|" + "---|" * 11]
    for row in rows:
        lines.append(f"| {row['workload']} | untraced | {row['untraced']['exit']} | {row['untraced']['seconds']} | "
                     "| | | | | | |")
        for mode in MODES:
            r = row[mode]
            size = f"{r.get('trace_bytes', 0) / 1e6:.2f} MB" if r.get("trace_bytes") else "-"
            lines.append(f"| | {mode} | {r['exit']} | {r['seconds']} (x{r['overhead']}) | {r.get('kernels', '-')} | "
                         f"{r.get('nvtx_ranges', '-')} | {r.get('unattributed', '-')} | {_pairs(r.get('pair_counts'))} | "
                         f"{r.get('event_edges', '-')} | {_hazards(r)} | {size} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(WORKLOADS)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = bench(names, args.out, args.timeout)
    (args.out / "bench.json").write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=1))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
