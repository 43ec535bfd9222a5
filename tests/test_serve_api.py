"""`tracer serve` through Starlette's test client: the index against the verdicts the CLI wrote,
the level-of-detail timeline and search against the trace reader, jobs (allow-list, cancel, a
server that died), and the guard (token, CSRF, Host, read-only, traversal, uploads)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")
with warnings.catch_warnings():  # Starlette 1.x would rather have httpx2; httpx is what is installed
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from tests.serve_runs import HAZARD_TRACE, jobs_file, make_runs
from tracer.app import timeline as app_timeline
from tracer.serve.app import Server, Settings, build_app
from tracer.serve.config import check_request, load_jobs
from tracer.readers.load import load_trace

TOKEN = "t0ken-for-the-tests-0123456789"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_runs(tmp_path_factory.mktemp("runs"))


def _settings(root: Path, state: Path, **kw: object) -> Settings:
    base = {"roots": (root,), "state_dir": state, "jobs": load_jobs(jobs_file(state.parent / f"{state.name}.yaml", sys.executable)),
            "gpus": (), "allowed_hosts": ("testserver",), "rescan_s": 3600.0, "upload_limit": 1 << 20}
    base.update(kw)
    return Settings(**base)


@pytest.fixture(scope="module")
def client(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    root = runs["raw"].parent.parent
    state = tmp_path_factory.mktemp("state") / "s"
    with TestClient(build_app(_settings(root, state))) as c:
        c.headers["X-CSRF-Token"] = c.get("/api/session").json()["csrf"]
        yield c


def _id(client: TestClient, path_end: str) -> int:
    rows = client.get("/api/runs?limit=500").json()["runs"]
    return next(r["id"] for r in rows if r["path"].endswith(path_end))


def _wait(client: TestClient, job_id: int, states: tuple[str, ...], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} still {job['state']} after {timeout} s: {job}")


def test_the_index_summarises_each_run_from_the_verdict_the_cli_wrote(client: TestClient, runs: dict[str, Path]) -> None:
    rows = {r["path"]: r for r in client.get("/api/runs").json()["runs"]}
    verdict = json.loads((runs["raw"] / "verdict.json").read_text())
    raw = rows["traces/raw_no_wait"]
    assert raw["kind"] == "trace"
    assert raw["summary"]["hazards"] == sum(verdict["hazards"]["counts"][k] for k in ("RAW", "WAR", "WAW", "reuse")) > 0
    assert raw["status"] == "findings"
    job = rows["jobs/ddp_killed"]
    assert job["kind"] == "job" and job["summary"]["incomplete"] == 1
    assert job["summary"]["hazards"] is None  # no memory sets: unknown, never 0
    san = json.loads((runs["san"] / "report.json").read_text())
    assert rows["san"]["summary"]["runs"] == len(san["runs"])
    assert rows["prof"]["kind"] == "profile"
    assert client.get(f"/api/runs/{raw['id']}").json() == verdict


def test_list_filters_sorts_and_pages(client: TestClient) -> None:
    only = client.get("/api/runs?kind=sanitize").json()
    assert only["total"] == 1 and only["runs"][0]["kind"] == "sanitize"
    assert {r["path"] for r in client.get("/api/runs?q=ddp").json()["runs"]} == {"jobs/ddp_killed"}
    page = client.get("/api/runs?limit=1&offset=1&sort=path&order=asc").json()
    everything = [r["path"] for r in client.get("/api/runs?sort=path&order=asc").json()["runs"]]
    assert page["total"] == len(everything) and [r["path"] for r in page["runs"]] == everything[1:2]
    bad = client.get("/api/runs?sort=evil")
    assert bad.status_code == 400 and "allowed: created" in bad.json()["error"]


def test_timeline_level_of_detail_and_search_agree_with_the_reader(client: TestClient) -> None:
    run = _id(client, "raw_no_wait")
    trace = load_trace(HAZARD_TRACE)
    closed_ranges = int((trace.ranges.end >= 0).sum())
    whole = client.get(f"/api/runs/{run}/timeline?max=20000").json()
    assert whole["total"] == len(trace.kernels) + closed_ranges == whole["items"]
    assert sum(l["count"] for l in whole["lanes"] if l["kind"] == "stream") == len(trace.kernels)
    small = client.get(f"/api/runs/{run}/timeline?max=4").json()
    assert small["aggregated"] and sum(small["ops"]["n"]) == small["total"] == whole["total"]
    name = trace.kernel_name(0)
    found = client.get(f"/api/runs/{run}/search", params={"q": name[5:40]}).json()
    assert found["count"] == sum(1 for i in range(len(trace.kernels)) if name[5:40].lower() in trace.kernel_name(i).lower())
    assert client.get(f"/api/runs/{run}/timeline?start=10&end=5").status_code == 400
    assert client.get(f"/api/runs/{run}/timeline?max=abc").status_code == 400


def test_a_million_operations_come_back_binned_under_the_cap() -> None:
    n = 1_000_000
    start = (np.arange(n, dtype=np.int64) * 1000)
    lanes = app_timeline._assemble([("s0", "stream", 7, "", start, start + 500, np.zeros(n, dtype=np.int64),
                                     np.arange(n, dtype=np.int64))], ("k",), {"": 0})
    w = app_timeline.window(lanes, None, None, 2000)
    assert w["total"] == n and w["items"] <= 2000 and sum(w["ops"]["n"]) == n



def test_downloads_stay_inside_the_run(client: TestClient, runs: dict[str, Path], tmp_path: Path) -> None:
    run = _id(client, "raw_no_wait")
    assert client.get(f"/api/runs/{run}/files/verdict.json").json() == json.loads((runs["raw"] / "verdict.json").read_text())
    for evil in ("../../../../etc/passwd", "..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e/%2e%2e/etc/passwd"):
        r = client.get(f"/api/runs/{run}/files/{evil}")
        assert r.status_code in (400, 404) and "root:" not in r.text, evil
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the browser")
    link = runs["raw"] / "escape.txt"
    link.symlink_to(secret)
    try:
        r = client.get(f"/api/runs/{run}/files/escape.txt")
        assert r.status_code == 400 and "outside" in r.json()["error"]
    finally:
        link.unlink()
    assert client.get("/api/runs/..%2F..%2Fetc").status_code == 404


def test_the_perfetto_download_is_what_the_cli_exports(client: TestClient, runs: dict[str, Path], tmp_path: Path) -> None:
    from tracer.cli import main

    served = client.get(f"/api/runs/{_id(client, 'ddp_killed')}/perfetto")
    assert served.status_code == 200 and "attachment" in served.headers["content-disposition"]
    assert main(["trace", "export", "--perfetto", str(runs["job"]), "-o", str(tmp_path / "cli.json")]) == 0
    assert served.json() == json.loads((tmp_path / "cli.json").read_text())
    assert client.get(f"/api/runs/{_id(client, 'san')}/perfetto").status_code == 422  # no trace in a sanitize run


def test_job_requests_are_checked_against_the_allow_list(client: TestClient) -> None:
    for body, word in [({"action": "shell", "target": "x"}, "allowed: run"), ({"action": "run", "target": "rm -rf /"}, "allowed: torch_composite"),
                       ({"action": "command", "target": "hello", "argv": ["sh"]}, "unknown field 'argv'"),
                       ({"action": "trace", "target": "torch_composite", "device": "cpu"}, "for action run only"),
                       ({"action": "run", "target": "torch_composite", "shape": "1x1; rm"}, "must look like")]:
        r = client.post("/api/jobs", json=body)
        assert r.status_code == 400 and word in r.json()["error"], (body, r.json())
    gpu = client.post("/api/jobs", json={"action": "run", "target": "torch_composite"})
    assert gpu.status_code == 400 and "no GPU" in gpu.json()["error"]


def test_a_command_job_runs_and_a_cancel_stops_its_process_group(client: TestClient) -> None:
    done = _wait(client, client.post("/api/jobs", json={"action": "command", "target": "hello"}).json()["id"], ("done", "failed"))
    assert done["state"] == "done" and done["exit"] == 0 and "hello from a job" in done["log_tail"]
    job = client.post("/api/jobs", json={"action": "command", "target": "sleeper"}).json()
    _wait(client, job["id"], ("running",))
    pid = None
    while pid is None:  # the state is committed before the process starts, its pid right after
        pid = client.app.state.server.db.query("SELECT pid FROM jobs WHERE id=?", (job["id"],))[0][0]
    cancelled = client.delete(f"/api/jobs/{job['id']}").json()
    assert cancelled["state"] == "cancelled"
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_a_job_running_when_the_server_died_is_interrupted_not_rerun(runs: dict[str, Path], tmp_path: Path) -> None:
    settings = _settings(runs["raw"].parent.parent, tmp_path / "state")
    first = Server(settings)
    first.queue.log_dir.mkdir(parents=True)
    job = first.queue.submit(check_request(settings.jobs, {"action": "command", "target": "sleeper"}))
    first.queue.tick()  # started; then the server "dies": no shutdown
    pid = first.db.query("SELECT pid FROM jobs WHERE id=?", (job["id"],))[0][0]
    assert first.queue.get(job["id"])["state"] == "running"
    second = Server(settings)
    assert second.queue.recover() == [job["id"]]
    after = second.queue.get(job["id"])
    assert after["state"] == "interrupted" and "leftover processes were killed" in after["note"]
    first.queue.running[job["id"]][0].popen.wait(timeout=10)  # reap our own child
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    second.queue.tick()
    assert second.queue.get(job["id"])["state"] == "interrupted"  # never started again


def test_gpu_jobs_queue_per_gpu(runs: dict[str, Path], tmp_path: Path) -> None:
    settings = _settings(runs["raw"].parent.parent, tmp_path / "state", gpus=(3,))
    server = Server(settings)
    server.queue.log_dir.mkdir(parents=True)
    sleeper, env = (server.queue.submit(check_request(settings.jobs, {"action": "command", "target": t}))
                    for t in ("gpu_sleeper", "gpu_env"))
    try:
        server.queue.tick()
        assert server.queue.get(sleeper["id"])["state"] == "running" and server.queue.get(sleeper["id"])["gpu"] == 3
        server.queue.tick()
        assert server.queue.get(env["id"])["state"] == "queued"  # one job at a time on GPU 3
        server.queue.cancel(sleeper["id"])
        server.queue.tick()
        deadline = time.monotonic() + 60
        while server.queue.get(env["id"])["state"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.1)
            server.queue.tick()
        done = server.queue.get(env["id"])
        assert done["state"] == "done" and done["log_tail"] == ["on GPU 3"]
    finally:
        server.queue.shutdown()


def test_the_index_follows_runs_appearing_changing_and_going(runs: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "r"
    shutil.copytree(runs["raw"], root / "a")
    server = Server(_settings(root, tmp_path / "state"))
    server.scan()
    assert [r["path"] for r in server.index.list()[1]] == ["a"]
    shutil.copytree(runs["raw"], root / "b")
    (root / "a" / "verdict.json").write_text("{truncated")
    server.scan()
    rows = {r["path"]: r for r in server.index.list()[1]}
    assert set(rows) == {"a", "b"} and rows["a"]["status"] == "error" and "not readable JSON" in rows["a"]["error"]
    shutil.rmtree(root / "b")
    server.scan()
    assert [r["path"] for r in server.index.list()[1]] == ["a"]
    assert server.last_scan["runs"] == 1


def test_the_guard_token_csrf_host_and_read_only(runs: dict[str, Path], tmp_path: Path) -> None:
    root = runs["raw"].parent.parent
    with TestClient(build_app(_settings(root, tmp_path / "s1", token=TOKEN))) as c:
        assert c.get("/api/runs").status_code == 401
        assert c.get("/api/runs", headers={"Authorization": "Bearer wrong-token-wrong-token"}).status_code == 401
        assert c.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        login = c.get(f"/?token={TOKEN}", follow_redirects=False)
        assert login.status_code == 303 and login.headers["location"] == "/"
        assert c.get("/api/runs").status_code == 200  # the cookie login set
        assert c.post("/api/jobs", json={"action": "command", "target": "hello"}).status_code == 403  # no CSRF header
        csrf = c.get("/api/session").json()["csrf"]
        cross = c.post("/api/jobs", json={"action": "command", "target": "hello"},
                       headers={"X-CSRF-Token": csrf, "Origin": "http://evil.example"})
        assert cross.status_code == 403 and "cross-origin" in cross.json()["error"]
        assert c.get("/api/runs", headers={"Host": "evil.example"}).status_code == 400
    with TestClient(build_app(_settings(root, tmp_path / "s2", read_only=True))) as c:
        csrf = c.get("/api/session").json()["csrf"]
        r = c.post("/api/jobs", json={"action": "command", "target": "hello"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 403 and "read-only" in r.json()["error"]
        page = c.get("/")
        assert "default-src 'none'" in page.headers["content-security-policy"]


def test_uploads_are_limited_and_read_by_the_fail_closed_importer(client: TestClient) -> None:
    too_big = client.post("/api/import?name=big.sqlite", content=b"x" * ((1 << 20) + 1))
    assert too_big.status_code == 413
    assert client.post("/api/import?name=../../x.sqlite", content=b"x").status_code == 400
    assert client.post("/api/import?name=a.exe", content=b"x").status_code == 400
    bad = _wait(client, client.post("/api/import?name=junk.sqlite", content=b"not a trace").json()["id"], ("done", "failed"))
    assert bad["state"] == "failed" and bad["exit"] == 6
    good = client.post("/api/import?name=raw.sqlite", content=HAZARD_TRACE.read_bytes())
    job = _wait(client, good.json()["id"], ("done", "failed"))
    assert job["state"] == "done", job["log_tail"]
    client.app.state.server.scan()
    rows = client.get("/api/runs", params={"q": job["output"]}).json()["runs"]
    assert len(rows) == 1 and rows[0]["summary"]["hazards"] > 0


def test_the_command_refuses_a_wide_bind_without_a_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    assert main(["serve", "--runs", str(tmp_path), "--host", "0.0.0.0"]) == 2
    assert "needs --token" in capsys.readouterr().err
    assert main(["serve", "--runs", str(tmp_path), "--token", "short"]) == 2
    assert "at least 16 characters" in capsys.readouterr().err
    assert main(["serve", "--runs", str(tmp_path / "missing")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_a_campaign_store_fills_in_while_it_runs(tmp_path: Path) -> None:
    from tracer.campaign.grid import load_campaign
    from tracer.campaign.report import report_data
    from tracer.campaign.trials_db import Store, TrialRow

    root = tmp_path / "runs"
    root.mkdir()
    store = Store.open(root / "smoke.sqlite", create=True)
    store.init(load_campaign("cpu_smoke"), {})
    first, second = (c.cell_id for c in store.cells()[:2])
    store.add_trials([TrialRow(cell_id=first, trial=t, failed=t % 4 == 0, crashed=False, first_failure=None, failed_checks="", gpu="cpu0", worker="w",
                               seconds=0.1) for t in range(20)])
    settings = _settings(root, tmp_path / "state")
    with TestClient(build_app(settings)) as c:
        row = c.get("/api/runs").json()["runs"][0]
        assert row["kind"] == "campaign" and row["status"] == "findings"
        assert row["summary"]["rates"][store.cells()[0].cell.label] == {"failures": 5, "trials": 20}
        assert row["summary"]["empty"] == row["summary"]["cells"] - 1  # cells without trials: no rate, not 0
        store.add_trials([TrialRow(cell_id=second, trial=t, failed=False, crashed=False, first_failure=None, failed_checks="", gpu="cpu0", worker="w",
                                   seconds=0.1) for t in range(30)])
        live = c.get(f"/api/runs/{row['id']}").json()  # the dashboard's question, answered from the store now
        assert live == json.loads(json.dumps(report_data(store, None), default=str))
        assert sum(cell["trials"] for cell in live["cells"]) == 50
        c.app.state.server.scan()
        again = c.get("/api/runs").json()["runs"][0]
        assert again["summary"]["rates"][store.cells()[1].cell.label] == {"failures": 0, "trials": 30}
    store.close()
