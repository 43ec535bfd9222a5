"""`tracer serve` measured against the targets of issue #29, each printed beside its target:

  index     10,000 run directories (copies of a captured trace run: verdict.json, command.json,
            trace.sqlite hard-linked) indexed from nothing, then rescanned with nothing changed
  list      GET /api/runs (first page, a text filter, a sort) and GET / on that index, over HTTP
            to the real command (p50/p99 of 50 each); in Chromium: navigation to the rendered list
  paint     a 1M-kernel trace (scripts/make_synthetic_trace.py): its run page in Chromium until the
            timeline's first paint, with the lanes the server built in the background after its
            scan (warm), and the first build itself (cold)
  load      50 concurrent clients browsing (list, run summary, timeline windows, search) while a
            CPU job runs: p50/p99 and errors
  kill      the server killed with -9 while a job runs, then restarted: the index and the job

    python scripts/bench_serve.py [--runs 10000] [--kernels 1000000] [--clients 50] [--seconds 20] [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CHROMIUM = os.environ.get("TRACER_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
SLEEPER = "import time; time.sleep(600)"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def load_average() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def line(name: str, value: float, target: float, unit: str) -> None:
    print(f"  {name:<46} {value:10.3f} {unit:<3} target {target:g} {unit}: x{value / target:.3f} of target "
          f"({'met' if value <= target else 'MISSED'})", flush=True)


class Served:
    def __init__(self, runs: Path, state: Path, jobs: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        self.t0 = time.monotonic()
        with open(state.parent / f"{state.name}.log", "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen([sys.executable, "-m", "tracer", "serve", "--runs", str(runs), "--state", str(state),
                                          "--port", str(self.port), "--jobs", str(jobs), "--gpus", "none", "--rescan-s", "5"],
                                         stdout=log, stderr=subprocess.STDOUT, env=env)
        while True:
            try:
                self.get("/api/session")
                break
            except OSError as exc:
                if self.proc.poll() is not None or time.monotonic() - self.t0 > 600:
                    raise SystemExit(f"the server did not start: {(state.parent / f'{state.name}.log').read_text()[-2000:]}") from exc
                time.sleep(0.1)
        self.ready_s = time.monotonic() - self.t0
        self.csrf = self.get("/api/session")["csrf"]

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=60) as r:
            body = r.read()
        return json.loads(body) if body[:1] in (b"{", b"[") else body

    def send(self, method: str, path: str, body: Any = None) -> Any:
        req = urllib.request.Request(f"{self.url}{path}", method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"X-CSRF-Token": self.csrf, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def timed(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def make_runs(work: Path, n: int) -> Path:
    from tests.serve_runs import make_runs as fixture_runs

    runs = work / "runs"
    seed = fixture_runs(work / "seed")["raw"]
    for i in range(n):
        d = runs / f"batch{i // 1000:02d}" / f"run{i:05d}"
        d.mkdir(parents=True)
        os.link(seed / "trace.sqlite", d / "trace.sqlite")
        shutil.copy(seed / "verdict.json", d / "verdict.json")
        (d / "command.json").write_text(json.dumps({"argv": ["tracer", "trace", "run", f"workload{i % 7}"], "backend": "cupti"}))
    return runs


def bench_index(work: Path, runs: Path) -> None:
    from tracer.serve.db import Db
    from tracer.serve.index import RunIndex

    n = sum(1 for _ in runs.glob("batch*/run*"))
    db = Db(work / "index-bench" / "serve.sqlite")
    index = RunIndex(db, (runs,))
    first = index.scan()
    again = index.scan()
    print(f"index: {first.runs} runs ({n} made), {first.read} summarised", flush=True)
    line("index from nothing", first.seconds, 30.0, "s")
    line("rescan, nothing changed", again.seconds, 30.0, "s")
    db.close()


def bench_list(s: Served) -> None:
    total = s.get("/api/runs?limit=1")["total"]
    print(f"list: {total} runs indexed ({load_average()})")
    for name, path in [("GET /api/runs (first page of 50)", "/api/runs"), ("GET /api/runs?q=workload3", "/api/runs?q=workload3"),
                       ("GET /api/runs?sort=path&order=asc&offset=5000", "/api/runs?sort=path&order=asc&offset=5000"),
                       ("GET / (the page)", "/")]:
        c0 = cpu_s(s.proc.pid)
        xs = timed(lambda p=path: s.get(p), 50)
        print(f"  {name}: server CPU {(cpu_s(s.proc.pid) - c0) / 50 * 1000:.2f} ms per request")
        line(f"{name} p50", statistics.median(xs), 200.0, "ms")
        line(f"{name} p99", pct(xs, 99), 200.0, "ms")


def browser(fn: Any) -> Any:
    if not os.access(CHROMIUM, os.X_OK):
        print(f"  (no Chromium at {CHROMIUM}: browser measurement skipped)")
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            return fn(b.new_page(viewport={"width": 1400, "height": 900}))
        finally:
            b.close()


def bench_list_browser(s: Served) -> None:
    """Navigation start to: the HTML received, the first paint (the rows are in the HTML, so they
    are in it), and the page's scripts done (data-loaded-ms). The first of 6 loads fetches the
    scripts; the 5 after it are measured."""
    def go(page: Any) -> list[tuple[float, float, float]]:
        out = []
        for k in range(6):
            page.goto(s.url + "/")
            page.wait_for_selector("body[data-loaded='1']")
            got = page.evaluate("""() => {
                const n = performance.getEntriesByType('navigation')[0];
                const p = performance.getEntriesByName('first-contentful-paint')[0];
                return [n.responseEnd, p ? p.startTime : NaN, Number(document.body.dataset.loadedMs),
                        document.querySelectorAll('#runs tbody tr').length];
            }""")
            if k:
                out.append((got[0], got[1], got[2]))
        print(f"  (the page showed {got[3]} rows)")
        return out

    xs = browser(go)
    if xs:
        line("list page in Chromium: the HTML received (median of 5)", statistics.median(x[0] for x in xs), 200.0, "ms")
        line("list page in Chromium: first paint, rows drawn (median of 5)", statistics.median(x[1] for x in xs), 200.0, "ms")
        line("list page in Chromium: its scripts done (median of 5)", statistics.median(x[2] for x in xs), 200.0, "ms")


def wait_for_lanes(state: Path) -> float:
    """The server builds big traces' lanes right after its first scan; measure once that is done."""
    t = time.monotonic()
    while not list((state / "timeline").glob("*.npz")) and time.monotonic() - t < 600:
        time.sleep(0.5)
    return time.monotonic() - t


def bench_paint(s: Served, run_id: int, cold_s: float | None) -> None:
    def go(page: Any) -> list[float]:
        out = []
        for _ in range(3):
            page.goto(f"{s.url}/runs/{run_id}")
            page.wait_for_selector("canvas#timeline[data-paint-ms]", timeout=120_000)
            out.append(float(page.get_attribute("canvas#timeline", "data-paint-ms")))
            drawn = int(page.get_attribute("canvas#timeline", "data-drawn"))
        lanes = s.get(f"/api/runs/{run_id}/timeline?max=1")["lanes"]
        print(f"  (first paint drew {drawn} items for {sum(x['count'] for x in lanes if x['kind'] == 'stream'):,} kernels)")
        return out

    xs = browser(go)
    if xs:
        line("1M-kernel run page, first timeline paint (warm, median of 3)", statistics.median(xs) / 1000, 2.0, "s")
    if cold_s is not None:
        line("1M-kernel lanes built from the trace (cold, once per trace)", cold_s, 2.0, "s")


def _clients(port: int, paths: list[str], threads: int, first: int, stop_at: float) -> tuple[list[float], list[str], list[tuple[str, float]]]:
    """One client process: `threads` clients, each walking the paths from its own start over one
    kept-alive connection, as a browser does; latencies as the clients saw them, errors, and the
    time each request spent in the server's application (its Server-Timing header)."""
    import http.client

    lat: list[float] = []
    inside: list[tuple[str, float]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        i = k
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.time() < stop_at:
            path = paths[i % len(paths)]
            t = time.perf_counter()
            try:
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise OSError(f"HTTP {r.status}")
                took = (time.perf_counter() - t) * 1000
                timing = r.getheader("server-timing") or ""
                with lock:
                    lat.append(took)
                    if timing.startswith("app;dur="):
                        inside.append((path, float(timing[8:])))
            except (OSError, http.client.HTTPException) as exc:
                with lock:
                    errors.append(f"{path}: {exc}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            i += 1
        conn.close()

    pool = [threading.Thread(target=client, args=(first + k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return lat, errors, inside


def bench_load(s: Served, run_id: int, clients: int, seconds: float, processes: int = 5) -> None:
    import multiprocessing

    job = s.send("POST", "/api/jobs", {"action": "run", "target": "torch_composite", "device": "cpu", "steps": 3})
    while s.get(f"/api/jobs/{job['id']}")["state"] == "queued":
        time.sleep(0.1)
    paths = ["/api/runs", "/api/runs?q=workload2&offset=50", f"/api/runs/{run_id}/summary", f"/api/runs/{run_id}/timeline?max=4000",
             f"/api/runs/{run_id}/timeline?start=1000000&end=2000000&max=4000", f"/api/runs/{run_id}/search?q=dgrad",
             f"/api/jobs/{job['id']}", "/", f"/runs/{run_id}"]
    per = [clients // processes + (1 if k < clients % processes else 0) for k in range(processes)]
    stop_at = time.time() + seconds
    c0, w0 = cpu_s(s.proc.pid), time.monotonic()
    with multiprocessing.get_context("fork").Pool(processes) as pool:  # the clients' own Python must not be the limit
        parts = pool.starmap(_clients, [(s.port, paths, n, sum(per[:k]), stop_at) for k, n in enumerate(per)])
    server_cpu, wall = cpu_s(s.proc.pid) - c0, time.monotonic() - w0
    lat = [x for part, _, _ in parts for x in part]
    errors = [e for _, part, _ in parts for e in part]
    inside = [x for _, _, part in parts for x in part]
    state = s.get(f"/api/jobs/{job['id']}")["state"]
    print(f"load: {clients} clients (kept-alive connections) in {processes} processes for {seconds:g} s "
          f"while job {job['id']} ran ({state} at the end): "
          f"{len(lat)} requests, {len(errors)} errors, {len(lat) / seconds:.0f} req/s; server CPU {server_cpu:.1f} s in {wall:.1f} s wall "
          f"({server_cpu / max(1, len(lat)) * 1000:.2f} ms per request; {load_average()})")
    line("p50 under load", statistics.median(lat), 200.0, "ms")
    line("p99 under load", pct(lat, 99), 200.0, "ms")
    if inside:
        xs = [x for _, x in inside]
        print(f"  of which inside the server's application (Server-Timing): p50 {statistics.median(xs):.2f} ms, "
              f"p99 {pct(xs, 99):.2f} ms, max {max(xs):.1f} ms; per path (p50 / p99 / max ms, requests):")
        for path in paths:
            ys = [x for p, x in inside if p == path]
            if ys:
                print(f"    {path:<58} {statistics.median(ys):7.2f} {pct(ys, 99):8.2f} {max(ys):8.1f} {len(ys):7d}")
    for e in errors[:5]:
        print("  error:", e)
    s.send("DELETE", f"/api/jobs/{job['id']}")


def bench_kill(work: Path, runs: Path, jobs: Path) -> None:
    state = work / "kill-state"
    s = Served(runs, state, jobs)
    total = s.get("/api/runs?limit=1")["total"]
    job = s.send("POST", "/api/jobs", {"action": "command", "target": "sleeper"})
    while s.get(f"/api/jobs/{job['id']}")["state"] != "running":
        time.sleep(0.1)
    import sqlite3

    con = sqlite3.connect(f"file:{state / 'serve.sqlite'}?mode=ro", uri=True)
    pid = None
    while pid is None:  # committed running first, its pid right after the start
        pid = con.execute("SELECT pid FROM jobs WHERE id=?", (job["id"],)).fetchone()[0]
    con.close()
    s.stop(signal.SIGKILL)
    alive_after_kill = _alive(pid)
    t = time.monotonic()
    again = Served(runs, state, jobs)
    restart_s = time.monotonic() - t
    after = again.get(f"/api/jobs/{job['id']}")
    total2 = again.get("/api/runs?limit=1")["total"]
    print(f"kill -9: index {total} runs before, {total2} after a restart of {restart_s:.1f} s; job {job['id']} was running "
          f"(its process group {'outlived' if alive_after_kill else 'died with'} the server), now {after['state']!r}: "
          f"{after['note']}; leftover process alive after restart: {_alive(pid)}")
    assert total2 == total and after["state"] == "interrupted" and not _alive(pid)
    again.stop()


def _alive(pid: int) -> bool:
    """Is the process running (a zombie nobody reaped does not count)?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--only", default="index,list,paint,load,kill", help="stages to run, comma-separated")
    a = ap.parse_args()
    only = set(a.only.split(","))
    print(f"bench_serve on {os.cpu_count()} CPU(s), {load_average()} at the start", flush=True)
    work = a.work or Path(tempfile.mkdtemp(prefix="tracer-bench-serve-"))
    from tests.serve_runs import jobs_file

    big = work / "runs" / "big" / "trace_1m"
    if (big / "trace.sqlite").is_file():  # --work of an earlier run: its run folders (and index) kept
        runs = work / "runs"
        print(f"reusing the run directories under {work}", flush=True)
    else:
        t = time.monotonic()
        runs = make_runs(work, a.runs)
        print(f"made {a.runs} run directories in {time.monotonic() - t:.1f} s under {work}", flush=True)
        big.mkdir(parents=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_synthetic_trace.py"), str(big / "trace.sqlite"),
                       "--kernels", str(a.kernels), "--ranges", str(a.kernels // 10), "--streams", "8"], check=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL)
    from tracer.app.timeline import build_lanes

    cold = None
    if "paint" in only:
        t = time.monotonic()
        build_lanes(big)
        cold = time.monotonic() - t
    if "index" in only:
        bench_index(work, runs)
    jobs = jobs_file(work / "jobs.yaml", sys.executable)
    s = Served(runs, work / "state", jobs)
    waited = wait_for_lanes(work / "state")
    print(f"server up {s.ready_s:.1f} s after start (its first scan included); the 1M-kernel lanes were ready {waited:.1f} s later",
          flush=True)
    run_id = next(r["id"] for r in s.get("/api/runs?q=trace_1m")["runs"])
    if "list" in only:
        bench_list(s)
        bench_list_browser(s)
    if "paint" in only:
        bench_paint(s, run_id, cold)
    if "load" in only:
        bench_load(s, run_id, a.clients, a.seconds)
    print(f"SIGTERM stop: exit {s.stop()}")
    if "kill" in only:
        bench_kill(work, runs, jobs)


if __name__ == "__main__":
    main()
