"""Capture overhead of `trace run --memory`, side by side in one run: the same workload untraced,
under plain CUPTI tracing, under CUPTI with memory access sets, and under PyTorch's CUDA stream
sanitizer (CSAN), interleaved repetitions, median wall times and their ratios (goal: --memory at
most 1.5x plain CUPTI and below CSAN).

Run on a GPU machine:
    python scripts/bench_memory_capture.py [--repeats 2] [--json OUT.json] [-- WORKLOAD ARGS...]
(default workload: linear_backward --steps 3)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from tracer import proc
from tracer.capture.launcher import capture_run

DEFAULT = ["linear_backward", "--steps", "3"]
MODES = ("untraced", "cupti", "memory", "csan")


def one(mode: str, command: list[str], work: Path, timeout: float) -> tuple[float, int | None, dict]:
    """(seconds, exit code, what the trace holds) of one run in `mode`."""
    work.mkdir(parents=True)
    logs = work / "logs"
    logs.mkdir()
    if mode in ("untraced", "csan"):
        env = dict(os.environ) | ({"TORCH_CUDA_SANITIZER": "1"} if mode == "csan" else {})
        res = proc.run(command, timeout=timeout, stdout_path=logs / "stdout.log", stderr_path=logs / "stderr.log", env=env)
        races = res.stderr().count("CSAN detected a possible data race")
        return res.seconds, res.returncode, {"csan_races": races} if mode == "csan" else {}
    captured = capture_run(command, work, logs, timeout, memory=mode == "memory")
    info: dict = {"trace_mb": round(captured.trace.stat().st_size / 2**20, 2) if captured.trace else None}
    if captured.trace is not None:
        import sqlite3

        con = sqlite3.connect(captured.trace)
        info["kernels"] = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        if mode == "memory":
            info["ops"] = con.execute("SELECT COUNT(*) FROM TRACER_OPS").fetchone()[0]
            info["accesses"] = con.execute("SELECT COUNT(*) FROM TRACER_MEMORY_ACCESS").fetchone()[0]
        con.close()
    return captured.proc.seconds, captured.proc.returncode, info


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json")
    ap.add_argument("workload", nargs="*", help="after --: workload and its options (default: linear_backward --steps 3)")
    args = ap.parse_args()
    command = [sys.executable, "-m", "tracer", "run", *(args.workload or DEFAULT), "--no-fail-on-check"]
    times: dict[str, list[float]] = {m: [] for m in MODES}
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tracer-bench-memory-") as tmp:
        one("untraced", command, Path(tmp) / "warmup", args.timeout)  # kernel caches, page cache
        for r in range(args.repeats):  # interleaved, so drift hits every mode alike
            for mode in MODES:
                seconds, code, info = one(mode, command, Path(tmp) / f"{mode}-{r}", args.timeout)
                times[mode].append(seconds)
                runs.append({"mode": mode, "repeat": r, "seconds": round(seconds, 3), "exit": code, **info})
                print(f"{mode:<9} repeat {r}: {seconds:7.2f} s exit {code} {info}", flush=True)
                if args.json:  # what was measured survives a cut-off run
                    Path(args.json).write_text(json.dumps({"command": command, "runs": runs, "partial": True}, indent=1))
    med = {m: statistics.median(v) for m, v in times.items()}
    ratios = {"cupti/untraced": med["cupti"] / med["untraced"], "memory/cupti": med["memory"] / med["cupti"],
              "memory/csan": med["memory"] / med["csan"], "csan/untraced": med["csan"] / med["untraced"]}
    print(" ".join(f"{m} {med[m]:.2f} s" for m in MODES))
    print(" ".join(f"{k} {v:.2f}x" for k, v in ratios.items()),
          f"(goal: memory/cupti <= 1.5: {'met' if ratios['memory/cupti'] <= 1.5 else 'NOT met'}; "
          f"memory below csan: {'met' if ratios['memory/csan'] < 1 else 'NOT met'})")
    if any(r["mode"] == "csan" and r["exit"] not in (0, None) for r in runs):
        print("note: CSAN exited non-zero (it stops at the first race it reports): its time covers less work")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "runs": runs, "median_s": med, "ratios": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
