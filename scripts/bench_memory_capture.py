"""Capture overhead of `trace run --memory`, side by side in one run, with where the time goes.

The same workload untraced, under plain CUPTI (API records without getters: the default; and with
every API call, as before), under --memory with all its parts, with the dispatch mode only, with
everything but the dispatch mode, and under PyTorch's CUDA stream sanitizer (CSAN). Repetitions are
interleaved; medians. Each run gives its wall time (the process, start to exit), the workload's own
time (engine and steps, from `tracer run --json`: the steady part) and, for traced runs, the traced
process's timing from its marker (bootstrap, CUPTI start, hooks, periodic flushes, the exit's flush
and write). Goal: --memory at most 1.5x plain CUPTI and below CSAN (wall).

Run on a GPU machine:
    python scripts/bench_memory_capture.py [--repeats 2] [--modes a,b] [--json OUT.json] [-- WORKLOAD ARGS...]
(default workload: linear_backward --steps 3).

--per-step MODEL (linear_backward, gpt2 or gpt2-big): the steady-state cost per step, which the whole-process
ratio hides. scripts/step_workload.py runs STEPS steps, each in an NVTX range `stepN`, timed in the
process (wall and CPU); untraced, plain CUPTI, --memory, and --memory with a capture window over the
last WINDOW steps (`--memory-steps`): medians of the steps after the first two (warm-up), the window
run's steps inside and outside its window apart. Ratios are to untraced (goal: --memory steps at most
1.5x) and to plain CUPTI."""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from collections.abc import Callable
from typing import Any

from tracer import proc
from tracer.capture.launcher import capture_run
from tracer.capture.options import MEMORY_PARTS, CaptureOptions

DEFAULT = ["linear_backward", "--steps", "3"]
BASE = CaptureOptions()
MODES: dict[str, CaptureOptions | None] = {  # None: not traced by tracer; the essentials first (a cut-off run keeps them)
    "untraced": None,
    "cupti": BASE,
    "memory": replace(BASE, memory=True),
    "memory-window": replace(BASE, memory=True),  # memory_steps set from --per-step's window
    "csan": None,
    "cupti-allapis": replace(BASE, apis="all"),
    "memory-dispatch-only": replace(BASE, memory=True, parts=("dispatch",)),
    "memory-no-dispatch": replace(BASE, memory=True, parts=tuple(p for p in MEMORY_PARTS if p != "dispatch")),
}
PHASES = ("startup_s", "bootstrap", "cupti_import", "cupti_start", "torch_hooks", "periodic_flush", "exit_synchronize",
          "exit_flush", "exit_memory_tables", "exit_write", "exit_total")
HOOKS = ("dispatch", "api_callbacks", "allocator", "record_conversion")


def step_times(stdout: str) -> dict[str, list[float]] | None:
    """scripts/step_workload.py's last line: {"steps_s": [...], "steps_cpu_s": [...]}."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{") and "steps_s" in line:
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def workload_seconds(stdout: str) -> float | None:
    """`tracer run --json` prints its report; its `seconds` is the engine and the steps."""
    try:
        return float(json.loads(stdout[stdout.index("{"):])["seconds"])
    except (ValueError, KeyError, TypeError):
        return None


def one(mode: str, command: list[str], work: Path, timeout: float, fake: bool = False, window: str = "") -> dict[str, Any]:
    work.mkdir(parents=True)
    logs = work / "logs"
    logs.mkdir()
    options = MODES[mode]
    if options is not None and mode == "memory-window":
        options = replace(options, memory_steps=window)
    if options is not None and fake:  # the script's own check on a machine without a GPU
        options = replace(options, backend="fake", devices=("cpu",), lazy=False)
    if options is None:
        env = dict(os.environ) | ({"TORCH_CUDA_SANITIZER": "1"} if mode == "csan" else {})
        res = proc.run(command, timeout=timeout, stdout_path=logs / "stdout.log", stderr_path=logs / "stderr.log", env=env)
        extra = {"csan_races": res.stderr().count("CSAN detected a possible data race")} if mode == "csan" else {}
        return {"seconds": res.seconds, "exit": res.returncode, "workload_s": workload_seconds(res.stdout()),
                "steps": step_times(res.stdout()), **extra}
    captured = capture_run(command, work, logs, timeout, options=options)
    out = (logs / "stdout.log").read_text(errors="replace")
    info: dict[str, Any] = {"seconds": captured.proc.seconds, "exit": captured.proc.returncode,
                            "workload_s": workload_seconds(out), "steps": step_times(out)}
    if captured.trace is not None:
        info |= trace_counts(captured.trace, options.memory)
    root = [m for m in captured.processes if m.ppid == os.getpid()]  # the command's own process
    if root:
        marker = json.loads((work / "procs" / f"{root[0].file}.json").read_text())
        info["timing"] = marker.get("timing", {})
    return info


def trace_counts(db: Path, memory: bool) -> dict[str, Any]:
    con = sqlite3.connect(db)
    try:
        one_ = lambda sql: con.execute(sql).fetchone()[0]
        out = {"trace_mb": round(db.stat().st_size / 2**20, 2), "kernels": one_("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"),
               "api_records": one_("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
        if memory:
            out["ops"] = one_("SELECT COUNT(*) FROM TRACER_OPS")
            out["ext_correlations"] = one_("SELECT COUNT(*) FROM TRACER_EXTERNAL_CORRELATION")
        return out
    finally:
        con.close()


def breakdown(timing: dict[str, Any]) -> dict[str, float]:
    """Seconds per phase and hook of one traced run (absent ones: 0)."""
    phases = timing.get("phases_s", {})
    out = {p: float(timing.get(p) or 0.0) if p == "startup_s" else float(phases.get(p, 0.0)) for p in PHASES}
    hooks = timing.get("hooks", {})
    out |= {f"{h}_s": float(hooks.get(h, {}).get("s", 0.0)) for h in HOOKS}
    out |= {f"{h}_calls": float(hooks.get(h, {}).get("calls", 0)) for h in HOOKS}
    return out


def table(runs: list[dict[str, Any]], modes: list[str]) -> dict[str, dict[str, float | None]]:
    """Per mode: median wall, workload and fixed (wall - workload) seconds, and the median breakdown."""
    out: dict[str, dict[str, float | None]] = {}
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        row: dict[str, float | None] = {"wall": statistics.median(r["seconds"] for r in mine)}
        work = [r["workload_s"] for r in mine if r.get("workload_s") is not None]
        row["workload"] = statistics.median(work) if work else None
        row["fixed"] = row["wall"] - row["workload"] if row["workload"] is not None else None  # type: ignore[operator]  # wall is always set a line above
        parts = [breakdown(r["timing"]) for r in mine if r.get("timing")]
        for key in (parts[0] if parts else {}):
            row[key] = statistics.median(p[key] for p in parts)
        out[mode] = row
    return out


def show(rows: dict[str, dict[str, float | None]]) -> None:
    cols = ["wall", "workload", "fixed", *PHASES, *(f"{h}_s" for h in HOOKS)]
    print("seconds (medians)".ljust(22) + "".join(f"{c[:12]:>13}" for c in cols))
    for mode, row in rows.items():
        cells = "".join(f"{row[c]:>13.3f}" if row.get(c) is not None else f"{'-':>13}" for c in cols)
        print(f"{mode:<22}{cells}")
    for mode, row in rows.items():
        calls = {h: int(row[f"{h}_calls"] or 0) for h in HOOKS if row.get(f"{h}_calls")}
        if calls:
            print(f"  {mode}: hook calls {calls}")


def ratios(rows: dict[str, dict[str, float | None]]) -> dict[str, float]:
    def r(a: str, b: str, col: str) -> tuple[str, float] | None:
        x, y = rows.get(a, {}).get(col), rows.get(b, {}).get(col)
        return (f"{a}/{b} {col}", x / y) if x and y else None

    pairs = [("cupti", "untraced"), ("memory", "cupti"), ("memory", "csan"), ("csan", "untraced"),
             ("cupti-allapis", "cupti"), ("memory-dispatch-only", "cupti"), ("memory-no-dispatch", "cupti")]
    return dict(x for a, b in pairs for col in ("wall", "workload") if (x := r(a, b, col)))


WARMUP = 2  # steps left out of the steady state (first launches, cuBLAS and allocator warm-up)
PER_STEP_MODES = ("untraced", "cupti", "memory", "memory-window")


def steady(runs: list[dict[str, Any]], mode: str, key: str, keep: Callable[[int], bool]) -> float | None:
    """Median over the runs of mode of the steps kept (after the warm-up)."""
    vals = [t for r in runs if r["mode"] == mode and r.get("steps")
            for i, t in enumerate(r["steps"][key]) if i >= WARMUP and keep(i)]
    return statistics.median(vals) if vals else None


def hooks_per_step(runs: list[dict[str, Any]], steps: int) -> None:
    """Where a traced run's time went, from its marker's hooks (the whole process: model build and
    warm-up steps included): calls and seconds per step, microseconds per call."""
    for r in runs:
        cells = [f"{name} {h['calls'] / steps:,.0f} calls {h['s'] / steps:.4f} s ({1e6 * h['s'] / h['calls']:.1f} us/call)"
                 for name, h in sorted(r.get("hooks", {}).items()) if h.get("calls")]
        if cells:
            print(f"  hooks per step, {r['mode']} repeat {r['repeat']}: " + "; ".join(cells))


def per_step(args: argparse.Namespace) -> int:
    """The steady-state step cost of each mode, side by side (see the module's docstring)."""
    script = str(Path(__file__).with_name("step_workload.py"))
    command = [sys.executable, script, args.per_step, "--steps", str(args.steps)]
    first = args.steps - args.window
    window = f"{first}:{args.steps}"
    runs: list[dict[str, Any]] = []
    modes = [m for m in PER_STEP_MODES if m in args.step_modes.split(",")]
    with tempfile.TemporaryDirectory(prefix="tracer-bench-steps-") as tmp:
        one("untraced", command, Path(tmp) / "warmup", args.timeout)
        for rep in range(args.repeats):
            for mode in modes:
                info = one(mode, command, Path(tmp) / f"{mode}-{rep}", args.timeout, window=window)
                timing = info.pop("timing", None)
                if timing:
                    info["hooks"] = timing.get("hooks", {})
                runs.append({"mode": mode, "repeat": rep, **info})
                print(f"{mode:<14} repeat {rep}: {info['seconds']:6.2f} s exit {info['exit']} steps "
                      f"{[round(t, 3) for t in (info.get('steps') or {}).get('steps_s', [])]}", flush=True)
    rows: dict[str, dict[str, float | None]] = {}
    every: Callable[[int], bool] = lambda i: True  # three one-line predicates
    for mode in modes:
        rows[mode] = {f"{k}{suffix}": steady(runs, mode, key, keep) for k, key in (("wall", "steps_s"), ("cpu", "steps_cpu_s"))
                      for suffix, keep in (("", every), (" in window", lambda i: i >= first), (" outside", lambda i: i < first))}
    base, cupti = rows["untraced"], rows["cupti"]
    print(f"per-step steady state, {args.per_step}, {args.steps} steps (median of steps {WARMUP}..{args.steps - 1}, "
          f"{args.repeats} repeats; memory-window: --memory-steps {window}); wall and CPU seconds per step:")
    shown = [("untraced", ""), ("cupti", ""), ("memory", ""), ("memory-window", " in window"), ("memory-window", " outside")]
    for mode, part in (x for x in shown if x[0] in rows):
        w, c = rows[mode][f"wall{part}"], rows[mode][f"cpu{part}"]
        if w is None or base["wall"] is None or cupti["wall"] is None:
            print(f"  {mode + part:<26} no steps measured")
            continue
        print(f"  {mode + part:<26} wall {w:8.4f} s ({w / base['wall']:.2f}x untraced, {w / cupti['wall']:.2f}x cupti)   "
              f"cpu {c or 0:8.4f} s ({(c or 0) / (base['cpu'] or 1):.2f}x untraced)")
    hooks_per_step(runs, args.steps)
    mem = rows["memory"]["wall"]
    if mem is not None and base["wall"]:
        print(f"goal: --memory steps <= 1.5x untraced: {'met' if mem / base['wall'] <= 1.5 else 'NOT met'} ({mem / base['wall']:.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "window": window, "runs": runs, "rows": rows}, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--modes", default=",".join(m for m in MODES if m != "memory-window"), help=f"comma-separated, of: {', '.join(MODES)}")
    ap.add_argument("--json")
    ap.add_argument("--fake", action="store_true", help="the fake backend (checking this script without a GPU)")
    ap.add_argument("--per-step", choices=("linear_backward", "gpt2", "gpt2-big"), help="the steady-state step cost of this model instead")
    ap.add_argument("--steps", type=int, default=10, help="--per-step: steps per run")
    ap.add_argument("--window", type=int, default=3, help="--per-step: the memory-window run records the last N steps")
    ap.add_argument("--step-modes", default=",".join(PER_STEP_MODES), help=f"--per-step: comma-separated, of {', '.join(PER_STEP_MODES)}")
    ap.add_argument("workload", nargs="*", help="after --: workload and its options (default: linear_backward --steps 3)")
    args = ap.parse_args()
    if args.per_step:
        return per_step(args)
    modes = [m for m in args.modes.split(",") if m in MODES]
    command = [sys.executable, "-m", "tracer", "run", *(args.workload or DEFAULT), "--no-fail-on-check", "--json"]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tracer-bench-memory-") as tmp:
        one("untraced", command, Path(tmp) / "warmup", args.timeout)  # kernel caches, page cache
        for rep in range(args.repeats):  # interleaved, so drift hits every mode alike
            for mode in modes:
                info = one(mode, command, Path(tmp) / f"{mode}-{rep}", args.timeout, args.fake)
                runs.append({"mode": mode, "repeat": rep, **info})
                print(f"{mode:<22} repeat {rep}: {info['seconds']:7.2f} s (workload {info.get('workload_s')}) exit {info['exit']} "
                      f"{ {k: v for k, v in info.items() if k not in ('seconds', 'exit', 'timing', 'workload_s')} }", flush=True)
                if args.json:  # what was measured survives a cut-off run
                    Path(args.json).write_text(json.dumps({"command": command, "runs": runs, "partial": True}, indent=1))
    rows = table(runs, modes)
    show(rows)
    rat = ratios(rows)
    print(" ".join(f"{k} {v:.2f}x" for k, v in rat.items()))
    wall = {k: v for k, v in rat.items() if k.endswith(" wall")}
    if "memory/cupti wall" in wall and "memory/csan wall" in wall:
        print(f"goal: memory/cupti <= 1.5: {'met' if wall['memory/cupti wall'] <= 1.5 else 'NOT met'}; "
              f"memory below csan: {'met' if wall['memory/csan wall'] < 1 else 'NOT met'}")
    if any(r["mode"] == "csan" and r["exit"] not in (0, None) for r in runs):
        print("note: CSAN exited non-zero (it stops at the first race it reports): its time covers less work")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "runs": runs, "table": rows, "ratios": rat}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
