"""Sanitizer benchmarks.

GPU (default): racecheck on linear_backward with the project's kernel filter vs unfiltered, side by side.
CPU (--imports N,M,...): `sanitize import` input at scale: synthetic XML of N records, each a copy
of a real racecheck record with its host stack (tests/data/sanitizer, about 5 KB), written to a
temporary folder and parsed by the default reader and by the defusedxml reference (`safe=True`, for
N up to --safe-up-to), each in a child process pinned to 2 cores: wall and CPU seconds, peak RSS.
With --log-mb M, a text log of M MB (copies of a real memcheck log's records) parsed streamed and,
for the ratio, from a list of all its lines (the old way).
Usage: python scripts/bench_sanitize.py [--tokens 512 --hidden 512 --layers 2] [--json OUT.json]
       python scripts/bench_sanitize.py --imports 100000,1000000 [--safe-up-to 100000] [--log-mb 200] [--json OUT.json]"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "sanitizer"
RECORD_FROM = DATA / "filtered-128" / "racecheck-hazard-planted_race.xml"
LOG_FROM = DATA / "unfiltered-1024" / "memcheck-planted_oob.log"
CHILD = """
import json, resource, sys, time
from pathlib import Path
t0, c0 = time.perf_counter(), time.process_time()
what, path = sys.argv[1], Path(sys.argv[2])
if what in ("xml", "xml-safe"):
    from tracer.sanitize.parse_xml import parse_xml
    p = parse_xml(path, "racecheck", safe=what == "xml-safe")
else:
    from tracer.sanitize.parse_text import parse_lines, parse_text
    if what == "log":
        p = parse_text(path, "memcheck")
    else:
        with open(path, errors="replace") as fh:
            p = parse_lines(fh.readlines(), "memcheck")
print(json.dumps({"what": what, "seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "records": p.records,
                  "incomplete": p.incomplete}))
"""


def make_xml(path: Path, records: int) -> None:
    head, rest = RECORD_FROM.read_text().split("<record>", 1)
    record = ("  <record>" + rest.split("</record>", 1)[0] + "</record>\n").encode()
    with open(path, "wb") as fh:
        fh.write(head.rstrip(" ").encode())
        for _ in range(records):
            fh.write(record)
        fh.write(b"</ComputeSanitizerOutput>\n")


def make_log(path: Path, megabytes: int) -> None:
    text = LOG_FROM.read_text()
    banner, body = text.split("\n", 1)
    body = body.split("========= ERROR SUMMARY")[0]
    copies = megabytes * 1_000_000 // len(body) + 1
    with open(path, "w") as fh:
        fh.write(banner + "\n")
        for _ in range(copies):
            fh.write(body)
        fh.write(f"========= ERROR SUMMARY: {copies * body.count('Program hit') + copies * body.count('Invalid __')} errors\n")


def child(what: str, path: Path) -> dict:
    import os
    import shutil

    argv = [sys.executable, "-c", CHILD, what, str(path)]
    if (os.cpu_count() or 1) > 2 and shutil.which("taskset"):
        argv = ["taskset", "-c", "0,1", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_imports(sizes: list[int], safe_up_to: int, log_mb: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-sanitize-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"racecheck-{n}.xml"
            make_xml(path, n)
            mb = path.stat().st_size / 1e6
            for what in ("xml", "xml-safe") if n <= safe_up_to else ("xml",):
                rows.append(dict(child(what, path), n=n, mb=mb))
                _print(rows[-1], rows[-2] if what == "xml-safe" else None)
            path.unlink()
        if log_mb:
            path = Path(tmp) / "memcheck.log"
            make_log(path, log_mb)
            for what in ("log", "log-readlines"):
                rows.append(dict(child(what, path), n=log_mb, mb=path.stat().st_size / 1e6))
                _print(rows[-1], rows[-2] if what == "log-readlines" else None)
    return rows


def _print(r: dict, fast: dict | None) -> None:
    ratio = f"  {r['cpu_s'] / fast['cpu_s']:.1f}x the CPU time, {r['peak_mb'] / fast['peak_mb']:.1f}x the memory" if fast else ""
    print(f"{r['what']:<14} {r['mb']:8.0f} MB {r['records']:>9} records {r['seconds']:7.1f} s wall {r['cpu_s']:7.1f} s CPU "
          f"{r['peak_mb']:6.0f} MB peak{ratio}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--imports", help="CPU: record counts of synthetic XML imports, comma-separated")
    ap.add_argument("--safe-up-to", type=int, default=100_000)
    ap.add_argument("--log-mb", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.imports:
        rows = bench_imports([int(n) for n in args.imports.split(",")], args.safe_up_to, args.log_mb)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-sanitize-"))
    profile = tmp / "linear_backward_small.yaml"
    profile.write_text(f"schema: 1\nworkload: linear_backward\nparams: {{tokens: {args.tokens}, hidden: {args.hidden}, "
                       f"layers: {args.layers}, microbatches: 1, steps: 1}}\nsanitize: {{kernel_filter: [cast_transpose]}}\n")
    out = tmp / "run"
    subprocess.run([sys.executable, "-m", "tracer", "sanitize", "--tool", "racecheck", "--filter", "both", "--jobs", "1",
                    "-o", str(out), str(profile)], check=False)
    runs = json.loads((out / "report.json").read_text())["runs"]
    secs = {r["filter"]: r["seconds"] for r in runs}
    print(f"racecheck linear_backward {args.tokens}x{args.hidden} x{args.layers} layers: filtered {secs['on']:.1f} s, "
          f"unfiltered {secs['off']:.1f} s, ratio {secs['off'] / secs['on']:.1f}x; verdicts "
          + ", ".join(f"{r['filter']}={r['verdict']}" for r in runs))
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": secs, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
