"""Capture the hazard test programs (tests/gpu/programs/) and two seed workloads under
`--memory` as small traces for the CPU tests of the hazard analysis; regenerates tests/data/hazards/.

Run on a GPU machine:  python scripts/capture_hazard_fixtures.py [OUT_DIR]  (default tests/data/hazards)
Or collect the run directories scripts/device_capture.sh made (RUNS/NAME, RUNS/seed-NAME):
    python scripts/capture_hazard_fixtures.py OUT_DIR --from RUNS
Issue #26's programs (tests/gpu/programs/ops_*.py: copies, memsets, CUDA graphs) alone, captured here or
collected from scripts/device_ops.sh's run directories, merged into captures.json:
    python scripts/capture_hazard_fixtures.py OUT_DIR --ops [--from RUNS]
Issue #26's second round (3D copies, a CUDA-array copy, collectives, the capture window), captured here
or collected from scripts/device_memory.sh's run directories (RUNS/NAME), merged into captures.json:
    python scripts/capture_hazard_fixtures.py OUT_DIR --only ops_copy3d array_copy collective_no_wait \
        collective_ddp window_steps [--from RUNS] [--prefix /checkout/]
Fixtures name no machine's paths: the checkout's and the interpreter's folders are cut from the
strings of every trace (call sites) and JSON file (argv) collected; on files copied by hand:
    python scripts/capture_hazard_fixtures.py --strip-paths FILE_OR_DIR... --prefix /checkout/ --prefix /venv/bin/
"""
from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "gpu"))

from memory_tables import EXPECTED, MAY, OPS_EXPECTED, OPS_MAY, PROGRAMS, raw_verdict
from tracer.capture.launcher import capture_run

WINDOWS = {"window_steps": "1:3"}  # programs captured with --memory-steps
# expected hazard kinds of the programs of --only that neither table above holds (tests/test_memory_window.py)
MORE_EXPECTED: dict[str, dict[str, int]] = {"window_steps": {"RAW": 2}, "array_copy": {}}
WORKLOADS = {
    "planted_cross_stream": ["planted_cross_stream", "--shape", "1024x1024x1024", "--steps", "2"],
    "event_ordered_dgrad": ["event_ordered_dgrad", "--shape", "1024x1024x1024", "--steps", "2"],
}


def capture(name: str, command: list[str], out: Path) -> dict:
    work = out / f".{name}"
    (work / "logs").mkdir(parents=True, exist_ok=True)
    res = capture_run(command, work, work / "logs", 300, memory=True, window=(WINDOWS.get(name, ""), ""))
    entry: dict = {"exit": res.proc.returncode, "seconds": round(res.proc.seconds, 1)}
    if res.trace is None:
        entry["error"] = (work / "logs" / "stderr.log").read_text()[-500:]
        return entry
    res.trace.replace(out / f"{name}.sqlite")
    shutil.rmtree(work)
    return entry | described(name, out / f"{name}.sqlite")


def described(name: str, trace: Path) -> dict:
    if name in OPS_EXPECTED or name in MORE_EXPECTED:  # judged by the analysis (tests/test_ops_fixtures.py), not the raw tables
        return {"expected": OPS_EXPECTED.get(name, MORE_EXPECTED.get(name)), "may": OPS_MAY.get(name, 0)} | (
            {"memory_steps": WINDOWS[name]} if name in WINDOWS else {})
    if name not in EXPECTED:
        return {}
    ok, seen = raw_verdict(name, trace)
    return {"expected": sorted(EXPECTED[name]), "may": name in MAY, "raw_ok": ok, "raw_seen": seen}


def collect(runs: Path, out: Path, names: list[str]) -> dict:
    """The traces of run directories made elsewhere (scripts/device_capture.sh, scripts/device_ops.sh)."""
    done = {}
    for name in names:
        run = runs / (name if name not in WORKLOADS else f"seed-{name}")
        command = run / "command.json"
        if not (run / "trace.sqlite").is_file():
            done[name] = {"error": f"no trace in {run}"}
            continue
        shutil.copyfile(run / "trace.sqlite", out / f"{name}.sqlite")
        info = json.loads(command.read_text()) if command.is_file() else {}
        done[name] = {"exit": info.get("exit"), "seconds": info.get("seconds")} | described(name, out / f"{name}.sqlite")
    return done


def strip_paths(path: Path, prefixes: list[str]) -> None:
    """Cut machine folders (`prefixes`) from a trace's strings or a JSON file's text."""
    if path.suffix == ".sqlite":
        con = sqlite3.connect(path)
        with con:
            for prefix in prefixes:
                con.execute("UPDATE StringIds SET value = REPLACE(value, ?, '') WHERE instr(value, ?) > 0", (prefix, prefix))
        con.execute("VACUUM")
        con.close()
    elif path.suffix == ".json":
        text = path.read_text()
        for prefix in prefixes:
            text = text.replace(prefix, "")
        path.write_text(text)


def default_prefixes() -> list[str]:
    return [f"{ROOT}/", f"{Path(sys.executable).parent}/"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", type=Path, default=ROOT / "tests" / "data" / "hazards")
    ap.add_argument("--from", dest="runs", type=Path, help="collect these run directories instead of capturing")
    ap.add_argument("--strip-paths", nargs="+", type=Path, help="only cut machine folders from these files or folders")
    ap.add_argument("--prefix", action="append", help="a folder to cut (default: the checkout and the interpreter's)")
    ap.add_argument("--ops", action="store_true", help="only issue #26's programs (ops_*), merged into captures.json")
    ap.add_argument("--only", nargs="+", help="only these programs of tests/gpu/programs, merged into captures.json")
    args = ap.parse_args()
    prefixes = args.prefix or default_prefixes()
    if args.strip_paths:
        for target in args.strip_paths:
            for f in ([target] if target.is_file() else sorted(target.rglob("*"))):
                strip_paths(f, prefixes)
        return 0
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    names = args.only or (OPS_EXPECTED if args.ops else EXPECTED)
    jobs = {name: [sys.executable, str(PROGRAMS / f"{name}.py")] for name in names}
    if not args.ops and not args.only:
        jobs |= {name: [sys.executable, "-m", "tracer", "run", *a, "--no-fail-on-check"] for name, a in WORKLOADS.items()}
    if args.runs is not None:
        done = collect(args.runs, out, list(jobs))
    else:
        with ThreadPoolExecutor(max_workers=4) as pool:
            done = dict(zip(jobs, pool.map(lambda kv: capture(kv[0], kv[1], out), jobs.items())))
    for name, entry in done.items():
        print(name, entry, flush=True)
    merge = args.ops or args.only
    kept = json.loads((out / "captures.json").read_text()) if merge and (out / "captures.json").is_file() else {}
    (out / "captures.json").write_text(json.dumps(kept | done, indent=1, sort_keys=True) + "\n")
    for name in done:  # the traces just written (the others are left byte for byte)
        if (out / f"{name}.sqlite").is_file():
            strip_paths(out / f"{name}.sqlite", prefixes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
