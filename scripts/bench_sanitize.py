"""Sanitizer benchmarks.

GPU (default): racecheck on linear_backward with the project's kernel filter vs unfiltered, side by side.
CPU (--imports N,M,...): `sanitize import` input at scale: synthetic XML of N records, copies of the
20 real racecheck hazard records of tests/data/sanitizer (about 5 KB each with their host stacks), each
copy with its own numbers where real output has them (address, thread and block indices, launch
counter), written to a temporary folder and parsed by each reader in a child process pinned to 2
cores, side by side: the scanning reader (the default; two processes above 64 MB), the same in one
process, the tree reader (the default before) and the defusedxml reference (`safe`, for N up to
--safe-up-to). Wall and CPU seconds (the worker's included), peak RSS of the reader and of its
worker, the load average around each, and a check that all readers found the same.
With --distinct N, also a file of N records that all differ in a line number (the scanning reader's
worst case: every record is new to it). With --log-mb M, a text log of M MB (copies of a real
memcheck log's records) parsed streamed and, for the ratio, from a list of all its lines (the old way).
Usage: python scripts/bench_sanitize.py [--tokens 512 --hidden 512 --layers 2] [--json OUT.json]
       python scripts/bench_sanitize.py --imports 100000,1000000 [--safe-up-to 100000] [--distinct 100000]
              [--log-mb 200] [--json OUT.json]"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "sanitizer"
RECORD_FROM = DATA / "filtered-128" / "racecheck-hazard-planted_race.xml"
LOG_FROM = DATA / "unfiltered-1024" / "memcheck-planted_oob.log"
CHILD = """
import hashlib, json, resource, sys, time
from pathlib import Path
t0, c0 = time.perf_counter(), time.process_time()
what, path = sys.argv[1], Path(sys.argv[2])
if what.startswith("xml"):
    from tracer.sanitize.parse_xml import XmlReader, parse_xml
    reader = {"xml": "scan", "xml-1": "scan", "xml-tree": "tree", "xml-safe": "safe"}[what]
    p = parse_xml(path, "racecheck", reader=XmlReader(reader), workers=2 if what == "xml" else 1)
else:
    from tracer.sanitize.parse_text import parse_lines, parse_text
    if what == "log":
        p = parse_text(path, "memcheck")
    else:
        with open(path, errors="replace") as fh:
            p = parse_lines(fh.readlines(), "memcheck")
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
found = hashlib.sha1(json.dumps([f.to_json() for f in p.findings]).encode()).hexdigest()[:12]
print(json.dumps({"what": what, "seconds": time.perf_counter() - t0,
                  "cpu_s": time.process_time() - c0 + kids.ru_utime + kids.ru_stime,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "worker_peak_mb": kids.ru_maxrss / 1024,
                  "records": p.records, "incomplete": p.incomplete, "findings": found}))
"""
READERS = ("xml", "xml-1", "xml-tree", "xml-safe")


def make_xml(path: Path, records: int, distinct: bool = False) -> None:
    """N records: the real ones cycled, each copy with its own address, thread and block indices and
    launch counter (and, `distinct`, its own line numbers: no two records alike)."""
    text = RECORD_FROM.read_text()
    head = text.split("<record>", 1)[0].rstrip(" ")
    real = ["  <record>" + r.split("</record>", 1)[0] + "</record>\n" for r in text.split("<record>")[1:]]
    names = "address|current|gridid|x" + ("|line" if distinct else "")
    vary = re.compile(rf"<({names})>[^<]*<")
    forms = [vary.sub(lambda m: f"<{m.group(1)}>{{{m.group(1)}}}<", r.replace("{", "{{").replace("}", "}}")) for r in real]
    with open(path, "w") as fh:
        fh.write(head)
        for i in range(records):
            fh.write(forms[i % len(forms)].format(address=hex(0x400 + i * 4 % 49152), current=i % 64, gridid=17 + i // 50000,
                                                  x=i % 256, line=200 + i))
        fh.write("</ComputeSanitizerOutput>\n")


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
    load = os.getloadavg()[0]
    out = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]), load=(load + os.getloadavg()[0]) / 2)


def bench_imports(sizes: list[int], safe_up_to: int, distinct: int, log_mb: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-sanitize-") as tmp:
        for n, alike in [(n, False) for n in sizes] + ([(distinct, True)] if distinct else []):
            path = Path(tmp) / f"racecheck-{n}.xml"
            make_xml(path, n, distinct=alike)
            mb = path.stat().st_size / 1e6
            _read_through(path)  # in the page cache for all readers alike
            done = [dict(child(w, path), n=n, mb=mb, distinct=alike) for w in READERS if w != "xml-safe" or n <= safe_up_to]
            for r in done:
                _print(r, done[0])
            if len({(r["records"], r["incomplete"], r["findings"]) for r in done}) != 1:
                raise SystemExit(f"readers disagree: {[(r['what'], r['records'], r['findings']) for r in done]}")
            rows += done
            path.unlink()
        if log_mb:
            path = Path(tmp) / "memcheck.log"
            make_log(path, log_mb)
            for what in ("log", "log-readlines"):
                rows.append(dict(child(what, path), n=log_mb, mb=path.stat().st_size / 1e6))
                _print(rows[-1], rows[-2] if what == "log-readlines" else None)
    return rows


def _read_through(path: Path) -> None:
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass


def _print(r: dict, base: dict | None) -> None:
    ratio = (f"  {r['cpu_s'] / base['cpu_s']:5.1f}x the CPU, {r['seconds'] / base['seconds']:5.1f}x the wall of {base['what']}"
             if base and r is not base else "")
    worker = f" + {r['worker_peak_mb']:4.0f} MB worker" if r.get("worker_peak_mb") else ""
    print(f"{r['what']:<14} {r['mb']:8.0f} MB {r['records']:>9} records {r['seconds']:7.1f} s wall {r['cpu_s']:7.1f} s CPU "
          f"{r['peak_mb']:5.0f} MB peak{worker}  load {r['load']:4.1f}{ratio}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--imports", help="CPU: record counts of synthetic XML imports, comma-separated")
    ap.add_argument("--safe-up-to", type=int, default=100_000)
    ap.add_argument("--distinct", type=int, default=0, help="CPU: records of a file where no two are alike")
    ap.add_argument("--log-mb", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.imports:
        rows = bench_imports([int(n) for n in args.imports.split(",")], args.safe_up_to, args.distinct, args.log_mb)
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
