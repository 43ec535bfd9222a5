"""Overhead of tracing every process of a torchrun DDP job (issue #16 goal: traced wall within 5%
of untraced), side by side in one run: `torchrun ... ddp_train.py` untraced and under
`tracer trace run -- torchrun ...`, interleaved repetitions, medians. For the traced runs: the
whole `tracer trace run` (what a user waits for), the traced command alone (command.json
`seconds`), tracer's own time around it (the interpreter and CLI imports: `python -m tracer
--version` alone; the capture set-up before the command and the settling after it: command.json
`tracer_s`, with the GPU check; the rest: arguments, the analysis, writing the run directory), the
ratio of each repeat's pair of runs, and per process (torchrun's agent, each rank) what tracer
spent, from the markers: start-up, bootstrap, CUPTI start, flushes, the exit's flush and write.

Run on a GPU machine (2 ranks share one GPU over gloo, or one GPU each over NCCL):
    python scripts/bench_ddp_capture.py [--repeats 3] [--nproc 2] [--json OUT.json]"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from tracer import proc

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "gpu" / "programs" / "ddp_train.py"
COSTS = ("startup_s", "bootstrap", "bootstrap_imports", "cupti_import", "cupti_start", "periodic_flush", "sync_flush",
         "exit_total")


def role(m: dict[str, Any]) -> str:
    return f"rank{m['rank']}" if m.get("rank") is not None else "agent"


def costs(marker: dict[str, Any]) -> dict[str, float]:
    t = marker.get("timing") or {}
    phases = t.get("phases_s", {})
    out = {c: float(t.get(c) or 0.0) if c == "startup_s" else float(phases.get(c, 0.0)) for c in COSTS}
    return out | {"alive_s": float(t.get("alive_s") or 0.0), "kernels": float(marker.get("kernels") or 0)}


def traced(command: list[str], work: Path, timeout: float) -> dict[str, Any]:
    run = work / "run"
    res = proc.run([sys.executable, "-m", "tracer", "trace", "run", "--backend", "cupti", "-o", str(run), "--", *command],
                   timeout=timeout, stdout_path=work / "stdout.log", stderr_path=work / "stderr.log")
    info: dict[str, Any] = {"seconds": res.seconds, "exit": res.returncode}
    try:
        cmd = json.loads((run / "command.json").read_text())
    except (OSError, ValueError):
        return info | {"error": res.stderr()[-400:]}
    info["command_s"] = cmd.get("seconds")
    own = cmd.get("tracer_s") or {}
    info["gpu_check_s"], info["before_s"], info["after_s"] = own.get("gpu_check"), own.get("before_command"), own.get("after_command")
    info["processes"] = {}
    for p in cmd.get("processes", []):
        marker = json.loads((run / "procs" / f"{p['file']}.json").read_text())
        info["processes"][role(p)] = {"outcome": p.get("outcome"), **costs(marker)}
    return info


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    untraced = [r["seconds"] for r in runs if r["mode"] == "untraced"]
    tr = [r for r in runs if r["mode"] == "traced" and "command_s" in r]
    out: dict[str, Any] = {"untraced_s": statistics.median(untraced) if untraced else None,
                           "traced_s": statistics.median(r["seconds"] for r in tr) if tr else None,
                           "traced_command_s": statistics.median(r["command_s"] for r in tr) if tr else None}
    roles = sorted({k for r in tr for k in r["processes"]})
    out["per_process"] = {k: {c: statistics.median(r["processes"][k].get(c, 0.0) for r in tr if k in r["processes"])
                              for c in (*COSTS, "alive_s", "kernels")} for k in roles}
    if out["untraced_s"] and out["traced_s"]:
        out["traced/untraced"] = out["traced_s"] / out["untraced_s"]
        out["command/untraced"] = out["traced_command_s"] / out["untraced_s"]
    for key in ("gpu_check_s", "before_s", "after_s"):
        known = [r[key] for r in tr if r.get(key) is not None]
        out[key] = statistics.median(known) if known else None
    startup = [r["seconds"] for r in runs if r["mode"] == "startup"]
    out["startup_s"] = statistics.median(startup) if startup else None
    paired = paired_ratios(runs)
    out["paired_ratios"] = paired
    out["paired_median"] = statistics.median(paired) if paired else None
    return out


def paired_ratios(runs: list[dict[str, Any]]) -> list[float]:
    """traced / untraced of each repeat (the two run back to back): slow drift in the machine's
    speed cancels within a pair."""
    by_rep: dict[int, dict[str, float]] = {}
    for r in runs:
        if r["mode"] in ("untraced", "traced") and r.get("exit") == 0:
            by_rep.setdefault(r["repeat"], {})[r["mode"]] = r["seconds"]
    return [p["traced"] / p["untraced"] for p in by_rep.values() if len(p) == 2]


def split(m: dict[str, Any]) -> str:
    """tracer's own seconds around the command, by part (medians)."""
    own = m["traced_s"] - m["traced_command_s"]
    parts = {"interpreter and CLI imports": m.get("startup_s"), "the GPU check": m.get("gpu_check_s"),
             "capture set-up": m.get("before_s"),
             "after the command (settling the processes)": m.get("after_s")}
    parts["the rest (arguments, analysis, run directory)"] = own - sum(v for v in parts.values() if v is not None)
    return f"tracer's own time around the command {own:.2f} s: " + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()
                                                                           if v is not None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json")
    args = ap.parse_args()
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.nproc), str(PROGRAM),
               "--steps", str(args.steps)]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tracer-bench-ddp-") as tmp:
        for rep in range(args.repeats):  # interleaved, so drift hits both alike
            work = Path(tmp) / f"untraced-{rep}"
            work.mkdir()
            res = proc.run(command, timeout=args.timeout, stdout_path=work / "stdout.log", stderr_path=work / "stderr.log")
            runs.append({"mode": "untraced", "repeat": rep, "seconds": res.seconds, "exit": res.returncode})
            work = Path(tmp) / f"traced-{rep}"
            work.mkdir()
            runs.append({"mode": "traced", "repeat": rep, **traced(command, work, args.timeout)})
            work = Path(tmp) / f"startup-{rep}"
            work.mkdir()
            res = proc.run([sys.executable, "-m", "tracer", "--version"], timeout=args.timeout, stdout_path=work / "stdout.log",
                           stderr_path=work / "stderr.log")
            runs.append({"mode": "startup", "repeat": rep, "seconds": res.seconds, "exit": res.returncode})
            for r in runs[-3:]:
                print(f"{r['mode']:<9} repeat {rep}: {r['seconds']:7.2f} s exit {r['exit']}"
                      + (f" (command {r.get('command_s')} s)" if r["mode"] == "traced" else ""), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps({"command": command, "runs": runs, "partial": True}, indent=1))
    med = medians(runs)
    print(f"untraced {med['untraced_s']:.2f} s, traced (tracer trace run) {med['traced_s']:.2f} s, "
          f"the traced command alone {med['traced_command_s']:.2f} s")
    if "traced/untraced" in med:
        print(f"traced/untraced {med['traced/untraced']:.3f}x (goal <= 1.05: {'met' if med['traced/untraced'] <= 1.05 else 'NOT met'}), "
              f"command/untraced {med['command/untraced']:.3f}x")
        if med["paired_ratios"]:
            r = med["paired_ratios"]
            print(f"traced/untraced per repeat (run back to back): median {med['paired_median']:.3f}x, "
                  f"from {min(r):.3f} to {max(r):.3f}")
        print(split(med))
    print("per process (medians, s): " + " ".join(f"{c:>12}" for c in (*COSTS, "alive_s", "kernels")))
    for k, row in med["per_process"].items():
        print(f"  {k:<24}" + " ".join(f"{row[c]:>12.3f}" for c in (*COSTS, "alive_s", "kernels")))
    if args.json:
        Path(args.json).write_text(json.dumps({"command": command, "runs": runs, "medians": med}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
