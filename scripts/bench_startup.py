"""Start-up time of the CLI on small inputs against `python -c "import numpy"`, measured side by side:
each round runs every case once in a fresh interpreter, in rotating order, so machine load falls on
all cases alike. Wall time and CPU time (user + system of the child, which a busy shared machine
disturbs less), medians over the rounds, and each case's ratio to numpy's.
Goal (issue: installable, fast to start): `tracer --help`, `trace analyze`, `plot` and
`sanitize import` within 2x of `import numpy`.
Bytecode is cached as an installed package has it (pip compiles at install): the untimed warm-up
writes every module's .pyc under a temporary PYTHONPYCACHEPREFIX, whatever PYTHONDONTWRITEBYTECODE
says, so the checkout stays clean; --no-pyc compiles tracer's sources on every run instead.
--against TREE runs the tracer cases on another checkout too (e.g. `git worktree add /tmp/main main`),
in the same rounds, as "CASE [before]": a before/after under the same machine load. The load
average is printed before and after the runs (a shared machine inflates wall times more than CPU).

    python scripts/bench_startup.py [--rounds 7] [--json OUT.json] [--no-pyc] [--against TREE]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "traces" / "cast_transpose_dgrad.sqlite"  # 342 kernels, nsys export
SANITIZER_XML = ROOT / "tests" / "data" / "sanitizer" / "unfiltered-1024" / "memcheck-clean.xml"
BASELINE = "import numpy"


def tracer_cases(out_dir: Path) -> dict[str, list[str]]:
    tracer = [sys.executable, "-m", "tracer"]
    return {
        "tracer --help": [*tracer, "--help"],
        "trace analyze": [*tracer, "trace", "analyze", str(TRACE)],
        "sanitize import": [*tracer, "sanitize", "import", str(SANITIZER_XML)],
        "plot stream-timeline": [*tracer, "plot", "stream-timeline", str(TRACE), "-o", str(out_dir / "timeline.png")],
    }


def cases(out_dir: Path, against: Path | None = None) -> dict[str, tuple[list[str], Path]]:
    """Each case's argv and the tree on PYTHONPATH; with `against`, every tracer case twice."""
    out: dict[str, tuple[list[str], Path]] = {BASELINE: ([sys.executable, "-c", "import numpy"], ROOT),
                                              "python (empty)": ([sys.executable, "-c", "pass"], ROOT)}
    for name, argv in tracer_cases(out_dir).items():
        if against is not None:
            out[f"{name} [before]"] = (argv, against)
        out[name] = (argv, ROOT)
    return out


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one run."""
    cpu, start = _cpu(), time.perf_counter()
    res = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    wall = time.perf_counter() - start
    if res.returncode != 0:
        raise SystemExit(f"bench_startup: {' '.join(argv[1:])} exited {res.returncode}: {res.stderr.strip()[-300:]}")
    return wall, _cpu() - cpu


def measure(rounds: int, pyc: bool = True, against: Path | None = None) -> dict[str, list[tuple[float, float]]]:
    env = dict(os.environ, MPLBACKEND="Agg")
    with tempfile.TemporaryDirectory(prefix="tracer-bench-startup-") as tmp:
        if pyc:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")  # mirrors each source path: two trees stay apart
        todo = cases(Path(tmp), against)
        envs = {name: dict(env, PYTHONPATH=str(tree)) for name, (_, tree) in todo.items()}
        names = list(todo)
        for name in names:  # warm the file cache and the bytecode cache once, untimed
            timed(todo[name][0], envs[name], Path(tmp))
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name].append(timed(todo[name][0], envs[name], Path(tmp)))
    return times


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-pyc", action="store_true", help="write no bytecode: compile tracer's sources on every run")
    ap.add_argument("--against", type=Path, help="another checkout (its root): its tracer cases run too, as CASE [before]")
    args = ap.parse_args()
    if args.against is not None and not (args.against / "tracer" / "__main__.py").is_file():
        raise SystemExit(f"bench_startup: --against {args.against}: no tracer/__main__.py there (give a checkout's root)")
    before = load()
    times = measure(args.rounds, pyc=not args.no_pyc, against=args.against)
    wall0 = statistics.median(w for w, _ in times[BASELINE])
    cpu0 = statistics.median(c for _, c in times[BASELINE])
    cache = "tracer compiled on every run (no .pyc)" if args.no_pyc else "bytecode cached"
    print(f"{args.rounds} rounds, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {cache}; medians in seconds")
    print(f"load average (1, 5, 15 min) before the runs {before}, after {load()}")
    print(f"{'case':<30} {'wall':>7} {'x numpy':>8} {'CPU':>7} {'x numpy':>8}")
    rows = {}
    for name, ts in times.items():
        wall, cpu = statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts)
        rows[name] = {"wall_s": round(wall, 4), "wall_ratio": round(wall / wall0, 2), "cpu_s": round(cpu, 4),
                      "cpu_ratio": round(cpu / cpu0, 2), "runs": [[round(w, 4), round(c, 4)] for w, c in ts]}
        print(f"{name:<30} {wall:>7.3f} {wall / wall0:>7.2f}x {cpu:>7.3f} {cpu / cpu0:>7.2f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
