"""`tracer serve` in a real Chromium driven by Playwright: the run list, a captured trace's run page
(hazards, a drawn timeline, click-to-highlight, search), jobs submitted and cancelled from the
page, traversal and token refusals. The server is the real command (`python -m tracer serve`),
stopped with SIGTERM. Screenshots go to $TRACER_SCREENSHOTS (docs/images for the README) or a temp
folder. Skipped with a reason where Chromium or Playwright is missing; .ci/run installs both."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve_runs import HOSTILE_RANGE, ORDERED_TRACE, ROOT, jobs_file, make_runs

CHROMIUM = os.environ.get("TRACER_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
TOKEN = "browser-test-token-0123456789"

if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium; scripts/setup.sh does it as root)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed (pip install '.[test]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    def __init__(self, root: Path, state: Path, jobs: Path, *extra: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        self.log = state.parent / f"{state.name}.log"
        with open(self.log, "wb") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen([sys.executable, "-m", "tracer", "serve", "--runs", str(root), "--state", str(state),
                                          "--port", str(self.port), "--jobs", str(jobs), "--gpus", "none", *extra],
                                         stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/static/style.css", timeout=2)
                return
            except urllib.error.HTTPError:
                return  # it answers (401 with a token)
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.2)
        raise AssertionError(f"tracer serve did not start: {self.log.read_text()}")

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=30) as r:
            return json.loads(r.read())

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("serve")
    make_runs(base / "runs")
    s = Served(base / "runs", base / "state", jobs_file(base / "jobs.yaml", sys.executable))
    yield s
    assert s.stop() == 0, s.log.read_text()  # SIGTERM: a clean stop


@pytest.fixture(scope="module")
def page(served: Served) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        yield pg
        browser.close()
        assert errors == []


def _shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("TRACER_SCREENSHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def _run_id(served: Served, end: str) -> int:
    return next(r["id"] for r in served.api("/api/runs")["runs"] if r["path"].endswith(end))


def test_the_run_list_loads(served: Served, page: Any) -> None:
    page.goto(served.url + "/")
    page.wait_for_selector("body[data-loaded='1']")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == served.api("/api/runs")["total"] == 6
    assert page.locator("#runs tbody tr", has_text="raw_no_wait").locator(".badge").inner_text() == "findings"
    with urllib.request.urlopen(served.url + "/") as r:  # the rows come in the HTML, before any script runs
        html = r.read().decode()
    assert all(f'href="/runs/{run["id"]}"' in html for run in served.api("/api/runs")["runs"])


def test_the_run_list_filters_sorts_and_pages_through_the_api(served: Served, page: Any) -> None:
    page.goto(served.url + "/?kind=trace")  # the server renders the query it is given
    page.wait_for_selector("body[data-loaded='1']")
    assert page.locator("#runs tbody tr").count() == 3 and page.input_value("#kind") == "trace"
    page.select_option("#kind", "")
    page.select_option("#statusf", "findings")
    findings = served.api("/api/runs?status=findings")["total"]
    sync_api.expect(page.locator("#runs tbody tr")).to_have_count(findings)  # the page's CSP forbids eval, so no wait_for_function
    assert {b.inner_text() for b in page.locator("#runs tbody .badge").all()} == {"findings"}
    page.click("th[data-sort='path']")  # descending by path, then ascending
    page.click("th[data-sort='path']")
    sync_api.expect(page.locator("#runs tbody tr td:nth-child(2)").first).to_have_text(re.compile(r"^jobs/"))


def test_a_trace_page_shows_hazards_draws_highlights_and_searches(served: Served, page: Any, tmp_path: Path) -> None:
    run = _run_id(served, "raw_no_wait")
    verdict = served.api(f"/api/runs/{run}")
    page.goto(f"{served.url}/runs/{run}")
    page.wait_for_selector("canvas#timeline[data-drawn]")
    assert page.locator("tr.hazard").count() == len(verdict["hazards"]["listed"]) > 0
    whole = served.api(f"/api/runs/{run}/timeline?max=20000")
    assert int(page.get_attribute("canvas#timeline", "data-drawn")) == whole["total"] > 0
    shots = _shots(tmp_path)
    page.screenshot(path=str(shots / "serve_run.png"), full_page=True)
    page.locator("tr.hazard").first.click()
    page.wait_for_selector("canvas#timeline[data-highlighted='2']")
    time.sleep(0.5)  # the zoomed view's operations are asked again
    page.locator("#tl").screenshot(path=str(shots / "serve_timeline.png"))
    word = "elementwise"
    page.fill("#search", word)
    page.click("#find")
    page.wait_for_selector("canvas#timeline[data-found]")
    found = served.api(f"/api/runs/{run}/search?q={word}")["count"]
    assert int(page.get_attribute("canvas#timeline", "data-found")) == found > 0
    assert page.locator("#found").inner_text().startswith(f"{found} match")


def test_names_from_a_trace_are_shown_as_text_never_run(served: Served, page: Any) -> None:
    run = _run_id(served, "names")
    page.goto(f"{served.url}/runs/{run}")
    page.wait_for_selector("canvas#timeline[data-drawn]")
    assert HOSTILE_RANGE in page.locator("#matters").inner_text()  # the UNORDERED pair's ranges, as text
    assert page.locator("main img, main script:not([src])").count() == 0  # (the page's own scripts have a src)
    page.fill("#search", "onerror")
    page.click("#find")
    page.wait_for_selector("canvas#timeline[data-found]")
    assert int(page.get_attribute("canvas#timeline", "data-found")) == 2
    page.mouse.move(*_centre_of_first_op(page))  # the hover text carries the kernel's name
    assert page.evaluate("document.body.dataset.pwned") is None


def _centre_of_first_op(page: Any) -> tuple[float, float]:
    box = page.locator("canvas#timeline").bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + 22 + 11  # first stream lane, mid-trace


def test_the_diff_page_of_two_runs(served: Served, page: Any) -> None:
    if not served.api("/api/session")["diff"]:
        pytest.skip("this tree has no tracer.app.diff: the diff page is off")
    a, b = _run_id(served, "event_ordered"), _run_id(served, "raw_no_wait")
    page.goto(f"{served.url}/")
    page.wait_for_selector("body[data-loaded='1']")
    page.check(f"#runs tr[data-id='{a}'] input[type=checkbox]")
    page.check(f"#runs tr[data-id='{b}'] input[type=checkbox]")
    page.click("#difflink")
    page.wait_for_selector("body[data-page='diff'][data-loaded='1']")
    assert page.locator("#error").is_hidden(), page.locator("#error").inner_text()
    d = served.api(f"/api/diff?a={a}&b={b}")
    assert d["hazards"] is not None and d["b"]["path"].endswith("raw_no_wait")
    assert d["kind"] == "diff" and page.locator("#meta").inner_text().startswith(d["compared"])
    hazard_card = page.locator(".card", has_text="hazards")
    assert hazard_card.count() == 1 and hazard_card.locator("tbody tr").count() >= 1


def _submit(page: Any, action: str, target: str, **fields: str) -> int:
    page.select_option("#action", action)
    page.select_option("#target", target)
    for k, v in fields.items():
        page.select_option(f"#{k}", v) if k == "device" else page.fill(f"#{k}", v)
    page.click("#go")
    page.wait_for_selector("#submitmsg:has-text('queued')")
    return int(page.locator("#submitmsg").inner_text().split()[1])


def test_a_cpu_job_is_submitted_and_watched_to_the_end(served: Served, page: Any) -> None:
    page.goto(served.url + "/jobs")
    page.wait_for_selector("body[data-loaded='1']")
    job = _submit(page, "run", "torch_composite", device="cpu", shape="64x64", steps="1")
    page.wait_for_selector(f"#jobs tr[data-id='{job}'][data-state='done']", timeout=240_000)
    assert "verdict: PASS" in page.locator("#log").inner_text()


def test_a_running_job_is_cancelled_from_the_page(served: Served, page: Any) -> None:
    page.goto(served.url + "/jobs")
    page.wait_for_selector("body[data-loaded='1']")
    job = _submit(page, "command", "sleeper")
    page.locator(f"#jobs tr[data-id='{job}'][data-state='running'] button.cancel").click(timeout=60_000)
    page.wait_for_selector(f"#jobs tr[data-id='{job}'][data-state='cancelled']", timeout=60_000)
    assert served.api(f"/api/jobs/{job}")["state"] == "cancelled"


def test_a_trace_is_imported_from_the_browser(served: Served, page: Any) -> None:
    page.goto(served.url + "/jobs")
    page.wait_for_selector("body[data-loaded='1']")
    page.set_input_files("#tracefile", str(ORDERED_TRACE))
    page.click("#importgo")
    page.wait_for_selector("#submitmsg:has-text('queued')")
    job = int(page.locator("#submitmsg").inner_text().split()[1])
    page.wait_for_selector(f"#jobs tr[data-id='{job}'][data-state='done']", timeout=120_000)
    output = served.api(f"/api/jobs/{job}")["output"]
    deadline = time.monotonic() + 30
    while not served.api(f"/api/runs?q={output}")["runs"] and time.monotonic() < deadline:
        time.sleep(0.5)  # the index rescans after every job
    assert served.api(f"/api/runs?q={output}")["runs"][0]["kind"] == "trace"


def test_traversal_is_refused(served: Served, page: Any) -> None:
    run = _run_id(served, "raw_no_wait")
    for evil in ("..%2F..%2F..%2F..%2Fetc%2Fpasswd", "../../../../etc/passwd"):
        r = page.goto(f"{served.url}/api/runs/{run}/files/{evil}")
        assert r.status in (400, 404) and "root:" not in page.content()


def test_a_request_without_the_token_is_refused(served: Served, page: Any, tmp_path: Path) -> None:
    runs = Path(served.proc.args[served.proc.args.index("--runs") + 1])
    other = Served(runs, tmp_path / "state", jobs_file(tmp_path / "jobs.yaml", sys.executable), "--token", TOKEN)
    try:
        r = page.goto(other.url + "/")
        assert r.status == 401 and "needs its token" in page.content()
        page.goto(f"{other.url}/?token={TOKEN}")
        page.wait_for_selector("body[data-loaded='1']")
        assert page.url == other.url + "/" and page.locator("#runs tbody tr").count() == served.api("/api/runs")["total"]
    finally:
        assert other.stop() == 0
