"""What `tracer trace run` itself costs around the command it traces (issue #16's goal, traced
wall within 5% of untraced, is end to end), on CPU with the fake backend (the same bootstrap,
markers, trace files and settling as CUPTI, no CUPTI): the same command untraced and under
`tracer trace run`, interleaved repetitions, medians, side by side in one run. The command is one
process, or a job of RANKS processes, each recording KERNELS fake kernels and sleeping SLEEP s.

Split of the traced run's wall time: the interpreter and the CLI's imports (`python -m tracer
--version`, measured alone), the capture set-up before the command and the settling after it
(command.json `tracer_s`), the command itself (command.json `seconds`), and the rest (argument
parsing, the analysis of a single-process trace, writing the run directory).

    python scripts/bench_trace_wrapper.py [--repeats 5] [--ranks 1 2] [--sleep 3] [--json OUT.json]"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from tracer import proc

PROGRAM = textwrap.dedent("""
    import os, subprocess, sys, time
    ranks, kernels, sleep = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    if ranks > 1 and "RANK" not in os.environ:
        children = [subprocess.Popen([sys.executable, __file__, "1", *sys.argv[2:]], env=os.environ | {"RANK": str(r)})
                    for r in range(ranks)]
        sys.exit(max(p.wait() for p in children))
    from_tracer = os.environ.get("TRACER_CAPTURE_DIR")
    if from_tracer:
        from tracer.capture.session import current
        for i in range(kernels):
            current().backend.fake_kernel(f"kernel_{i % 50}")
    time.sleep(sleep)
""")
# `python -m tracer trace run --backend cupti -o OUT -- COMMAND`, the capture on the fake backend (no GPU check)
RUNNER = textwrap.dedent("""
    import sys
    import tracer.gpu
    from tracer.capture import launcher
    from tracer.capture.options import CaptureOptions
    from tracer.cli import main
    real = launcher.capture_run
    launcher.capture_run = lambda *a, **k: real(*a, **k, options=CaptureOptions(backend="fake", lazy=False))
    tracer.gpu.require_gpu_for_capture = lambda: None  # the fake backend needs no GPU
    sys.exit(main(["trace", "run", "--backend", "cupti", "-o", sys.argv[1], "--", *sys.argv[2:]]))
""")


def one(argv: list[str], work: Path, timeout: float) -> proc.ProcResult:
    work.mkdir(parents=True)
    return proc.run(argv, timeout=timeout, stdout_path=work / "stdout.log", stderr_path=work / "stderr.log")


def traced(command: list[str], work: Path, timeout: float) -> dict[str, Any]:
    res = one([sys.executable, "-c", RUNNER, str(work / "run"), *command], work, timeout)
    info: dict[str, Any] = {"seconds": res.seconds, "exit": res.returncode}
    try:
        cmd = json.loads((work / "run" / "command.json").read_text())
    except (OSError, ValueError):
        return info | {"error": res.stderr()[-400:]}
    own = cmd.get("tracer_s") or {}
    return info | {"command_s": cmd["seconds"], "before_s": own.get("before_command"), "after_s": own.get("after_command")}


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def summary(runs: list[dict[str, Any]], startup: list[float]) -> dict[str, Any]:
    tr = [r for r in runs if r["mode"] == "traced" and "command_s" in r]
    out = {"untraced_s": median([r for r in runs if r["mode"] == "untraced"], "seconds"), "traced_s": median(tr, "seconds"),
           "command_s": median(tr, "command_s"), "before_s": median(tr, "before_s"), "after_s": median(tr, "after_s"),
           "startup_s": statistics.median(startup) if startup else None}
    if out["untraced_s"] and out["traced_s"]:
        out["traced/untraced"] = out["traced_s"] / out["untraced_s"]
        out["command/untraced"] = out["command_s"] / out["untraced_s"]
        known = sum(out[k] or 0.0 for k in ("startup_s", "before_s", "command_s", "after_s"))
        out["rest_s"] = out["traced_s"] - known
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--kernels", type=int, default=2000)
    ap.add_argument("--sleep", type=float, default=3.0)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tracer-bench-wrapper-") as tmp:
        prog = Path(tmp) / "prog.py"
        prog.write_text(PROGRAM)
        startup = [one([sys.executable, "-m", "tracer", "--version"], Path(tmp) / f"startup-{i}", args.timeout).seconds
                   for i in range(args.repeats)]
        for ranks in args.ranks:
            command = [sys.executable, str(prog), str(ranks), str(args.kernels), str(args.sleep)]
            runs: list[dict[str, Any]] = []
            for rep in range(args.repeats):  # interleaved, so drift hits both alike
                res = one(command, Path(tmp) / f"untraced-{ranks}-{rep}", args.timeout)
                runs.append({"mode": "untraced", "seconds": res.seconds, "exit": res.returncode})
                runs.append({"mode": "traced", **traced(command, Path(tmp) / f"traced-{ranks}-{rep}", args.timeout)})
            results[f"{ranks} process(es)"] = {"runs": runs, "summary": summary(runs, startup)}
    print(f"tracer trace run around a command sleeping {args.sleep:g} s, {args.kernels} fake kernels per process, "
          f"medians of {args.repeats}:")
    for name, r in results.items():
        s = r["summary"]
        print(f"  {name}: untraced {s['untraced_s']:.3f} s, traced end to end {s['traced_s']:.3f} s "
              f"({s.get('traced/untraced', 0):.3f}x), the traced command alone {s['command_s']:.3f} s "
              f"({s.get('command/untraced', 0):.3f}x)")
        print(f"    tracer's own {s['traced_s'] - s['command_s']:.3f} s: start-up and CLI imports {s['startup_s']:.3f}, "
              f"capture set-up {s['before_s'] or 0:.3f}, after the command {s['after_s'] or 0:.3f}, "
              f"the rest (arguments, analysis, run directory) {s.get('rest_s', 0):.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
