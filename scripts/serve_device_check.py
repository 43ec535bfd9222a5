"""On a GPU machine: `tracer serve` started as a user starts it, a trace run (`--memory`) and a
sanitize run submitted through its API, watched to the end, then their pages and API answers
checked; everything (the JSON answers, the run folders, the job logs) packed into OUT for a look
elsewhere (scripts/serve_device_check.sh runs it on the device).

    python scripts/serve_device_check.py --out DIR [--deadline 100]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

JOBS = """schema: 1
actions: [trace, sanitize]
workloads: [planted_cross_stream, cast_transpose_dgrad]
campaigns: []
gpu_slots: 2
timeout_s: 110
"""
REQUESTS = [{"action": "trace", "target": "planted_cross_stream", "memory": True, "steps": 1},
            {"action": "sanitize", "target": "cast_transpose_dgrad", "shape": "256x256x256", "steps": 1}]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--deadline", type=float, default=150.0)
    ap.add_argument("--serve-arg", action="append", default=[], help="more `tracer serve` options (a dry run on a CPU machine: --gpus=0)")
    a = ap.parse_args()
    t0 = time.monotonic()
    work = Path("/tmp/serve-device")
    if work.exists():
        import shutil

        shutil.rmtree(work)
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (work / "jobs.yaml").write_text(JOBS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with open(work / "server.log", "wb") as log:  # the child keeps its own descriptor
        server = subprocess.Popen([sys.executable, "-m", "tracer", "serve", "--runs", str(runs), "--port", str(port),
                                   "--jobs", str(work / "jobs.yaml"), "--rescan-s", "2", *a.serve_arg],
                                  stdout=log, stderr=subprocess.STDOUT)
    report: dict[str, Any] = {"checks": {}}
    try:
        session = _wait_up(url, server)
        report["session"] = session
        jobs = [_send(url, session["csrf"], r) for r in REQUESTS]
        report["submitted"] = jobs
        final = _watch(url, [j["id"] for j in jobs], t0 + a.deadline - 15)
        report["jobs"] = final
        time.sleep(3)  # a rescan after the jobs ended
        report["runs"] = _get(url, "/api/runs")["runs"]
        listing = _get(url, "/")  # the list page comes with its rows in the HTML
        for job in final:
            row = next((r for r in report["runs"] if job["output"] and r["path"].endswith(job["output"])), None)
            report["checks"][job["action"]] = _check(url, row, listing) if row else {"error": "its run is not in the index", "job": job}
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            report["server_exit"] = server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            report["server_exit"] = "killed after 20 s"
    report["seconds"] = round(time.monotonic() - t0, 1)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "serve_device_check.json").write_text(json.dumps(report, indent=1, default=str))
    with tarfile.open(a.out / "serve_device_runs.tar.gz", "w:gz") as tar:
        tar.add(work, arcname="serve-device", filter=lambda ti: None if ti.name.endswith(".npz") else ti)
    print(json.dumps({k: report.get(k) for k in ("error", "server_exit", "seconds")}))
    for job in report.get("jobs", []):
        print("job", json.dumps({k: job.get(k) for k in ("id", "action", "state", "exit", "gpu", "concurrency", "elapsed_s", "note")}))
    for action, check in report["checks"].items():
        print("run", action, json.dumps({k: check.get(k) for k in ("status", "headline", "in_list_page", "page", "timeline_total",
                                                                  "search_dgrad", "error")}))
    ok = report.get("error") is None and len(report["checks"]) == len(REQUESTS) and all(
        c.get("page") == "ok" and c.get("in_list_page") and not c.get("error") for c in report["checks"].values())
    print("serve_device_check:", "PASSED" if ok else "FAILED")
    sys.exit(0 if ok else 1)


def _wait_up(url: str, server: subprocess.Popen[bytes]) -> dict[str, Any]:
    for _ in range(300):
        try:
            return _get(url, "/api/session")
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"tracer serve exited {server.returncode}") from None
            time.sleep(0.1)
    raise RuntimeError("tracer serve did not answer within 30 s")


def _get(url: str, path: str) -> Any:
    with urllib.request.urlopen(url + path, timeout=60) as r:
        body = r.read()
    return json.loads(body) if body[:1] in (b"{", b"[") else body.decode("utf-8", "replace")


def _send(url: str, csrf: str, body: Any) -> Any:
    req = urllib.request.Request(url + "/api/jobs", method="POST", data=json.dumps(body).encode(),
                                 headers={"X-CSRF-Token": csrf, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:  # the server's one-line reason, not only the status
        raise RuntimeError(f"POST /api/jobs {json.dumps(body)}: HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')[:300]}") from None


def _watch(url: str, ids: list[int], deadline: float) -> list[dict[str, Any]]:
    while True:
        jobs = [_get(url, f"/api/jobs/{i}") for i in ids]
        if all(j["state"] not in ("queued", "running") for j in jobs) or time.monotonic() > deadline:
            return jobs
        time.sleep(1)


def _check(url: str, row: dict[str, Any], listing: str) -> dict[str, Any]:
    rid = row["id"]
    out: dict[str, Any] = {"id": rid, "path": row["path"], "status": row["status"], "summary": row["summary"],
                           "headline": row.get("headline"), "error": row["error"],
                           "in_list_page": f'href="/runs/{rid}"' in listing}
    out["files"] = [f["name"] for f in _get(url, f"/api/runs/{rid}/summary")["files"]]
    verdict = _get(url, f"/api/runs/{rid}")
    out["verdict_keys"] = sorted(verdict)[:30] if isinstance(verdict, dict) else str(verdict)[:200]
    page = _get(url, f"/runs/{rid}")
    out["page"] = "ok" if isinstance(page, str) and "/static/run.js" in page else str(page)[:200]
    if row["kind"] in ("trace", "job"):
        tl = _get(url, f"/api/runs/{rid}/timeline?max=2000")
        out["timeline_total"], out["timeline_items"], out["lanes"] = tl["total"], tl["items"], [x["label"] for x in tl["lanes"]]
        out["search_dgrad"] = _get(url, f"/api/runs/{rid}/search?q=dgrad")["count"]
    return out


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
