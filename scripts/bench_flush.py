"""What the flush interval costs a traced training loop, side by side (issue #32).

A loop of small steps (4 kernels and a device synchronisation each) runs untraced and traced with:
the old defaults (periodic flush every 2 s, a forced flush at a synchronisation at most every
2 s), the new defaults (every 0.5 s; at the first synchronisation, then at most every 0.1 s), and
the most eager setting (every 0.1 s; at every synchronisation). The program times its own steps
(perf_counter around the loop, after a warm-up); repetitions are interleaved, medians reported,
with the ratio to the old defaults. The flushes' own time comes from the traced process's marker.

Run on a GPU machine:  python scripts/bench_flush.py [--steps 3000] [--repeats 2] [--json OUT.json]"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

from tracer import proc
from tracer.capture.launcher import capture_run
from tracer.capture.options import CaptureOptions

BASE = CaptureOptions()
MODES: dict[str, CaptureOptions | None] = {
    "untraced": None,
    "old 2s/sync 2s": replace(BASE, flush_s=2.0, sync_flush_s=2.0),
    "new 0.5s/sync 0.1s": BASE,
    "0.5s/sync 0.25s": replace(BASE, sync_flush_s=0.25),
    "eager 0.1s/every sync": replace(BASE, flush_s=0.1, sync_flush_s=0.0),
}
PROGRAM = textwrap.dedent("""
    import json, sys, time, torch
    steps = int(sys.argv[1])
    a = torch.randn(256, 256, device="cuda")
    def step():
        global a
        b = a @ a
        a = torch.tanh(b) * 0.5 + 0.1
        torch.cuda.synchronize()
    for _ in range(50):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    print(json.dumps({"step_us": (time.perf_counter() - t0) / steps * 1e6}), flush=True)
""")


def one(mode: str, prog: Path, steps: int, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True)
    options = MODES[mode]
    if options is None:
        res = proc.run([sys.executable, str(prog), str(steps)], timeout=600, stdout_path=work / "out", stderr_path=work / "err")
        out, timing = res.stdout(), {}
    else:
        (work / "logs").mkdir()
        cap = capture_run([sys.executable, str(prog), str(steps)], work, work / "logs", 600, options=options)
        out = (work / "logs" / "stdout.log").read_text()
        busy = [m for m in cap.processes if m.kernels]
        timing = (busy[0].timing or {}).get("phases_s", {}) if busy else {}
        res = cap.proc
    if res.returncode != 0:
        raise SystemExit(f"{mode}: exit {res.returncode}: {out[-300:]}")
    line = next(x for x in out.splitlines() if x.startswith("{"))
    return {"step_us": json.loads(line)["step_us"], "periodic_flush_s": timing.get("periodic_flush", 0.0),
            "sync_flush_s": timing.get("sync_flush", 0.0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "loop.py"
        prog.write_text(PROGRAM)
        for r in range(args.repeats):
            for mode in MODES:
                results[mode].append(one(mode, prog, args.steps, Path(tmp) / f"{r}-{mode.replace(' ', '_').replace('/', '_')}"))
    med = {m: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for m, rs in results.items()}
    old = med["old 2s/sync 2s"]["step_us"]
    print(f"{'mode':<24}{'step us':>10}{'x old':>8}{'x untraced':>12}{'periodic s':>12}{'sync flush s':>14}")
    for m, v in med.items():
        print(f"{m:<24}{v['step_us']:>10.1f}{v['step_us'] / old:>8.3f}{v['step_us'] / med['untraced']['step_us']:>12.3f}"
              f"{v['periodic_flush_s']:>12.3f}{v['sync_flush_s']:>14.3f}")
    if args.json:
        args.json.write_text(json.dumps({"steps": args.steps, "repeats": args.repeats, "median": med, "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
