"""The ASGI application of `tracer serve` (Starlette): HTML pages, the JSON API they use, static
files shipped in the package. Presentation only: what a page shows comes from tracer.app (the
functions the CLI's readers and analysis stand behind), the index and the job queue.
"""
from __future__ import annotations

import hmac
import json
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracer.app import runs as app_runs
from tracer.app import timeline as app_timeline
from tracer.errors import TraceFormatError, TracerError, UsageError
from tracer.schemas import header, with_header
from tracer.serve import pages
from tracer.serve.config import Action, JobRequest, JobsConfig, check_request
from tracer.serve.db import Db, NotFound
from tracer.serve.index import RunIndex, ScanResult
from tracer.serve.jobs import JobQueue
from tracer.serve.scanner import ScanWorker

STATIC = Path(__file__).parent / "static"
STATE_NAME = ".tracer-serve"
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
UPLOAD_SUFFIXES = (".sqlite", ".json", ".json.gz")
HTML = "text/html; charset=utf-8"
JOB_FRESH_S = 0.25  # a job's answer (state, log tail) is reused for this long: clients poll it
LANES_CACHED = 4


@dataclass(frozen=True, kw_only=True)
class Settings:
    roots: tuple[Path, ...]
    state_dir: Path
    jobs: JobsConfig
    gpus: tuple[int, ...] = ()
    token: str | None = None
    read_only: bool = False
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]")  # Host header names (any port)
    upload_limit: int = 256 << 20
    rescan_s: float = 10.0
    output_dir: Path | None = None  # job outputs and imports; default: ROOT/jobs of the first root
    diff: bool = field(default=False)
    scan_in_child: bool = True  # rescans after the first in a niced child process (tracer/serve/scanner.py)


class Answers:
    """Recent answers (JSON or HTML bytes) by what they depend on (the index generation, a run and
    the query), so many clients browsing the same runs cost one computation each; `peek` is cheap
    enough for the event loop, so a cached answer never waits for a worker thread."""

    def __init__(self, size: int = 1024) -> None:
        self.size, self.items, self.lock = size, OrderedDict[Any, bytes](), threading.Lock()
        self.making: dict[Any, threading.Lock] = {}

    def peek(self, key: Any) -> bytes | None:
        with self.lock:
            body = self.items.get(key)
            if body is not None:
                self.items.move_to_end(key)
            return body

    def body(self, key: Any, make: Callable[[], bytes]) -> bytes:
        body = self.peek(key)
        if body is None:
            with self.lock:
                making = self.making.setdefault(key, threading.Lock())
            with making:  # clients asking the same new question at once wait for one answer
                body = self.peek(key)
                if body is None:
                    body = make()
                    with self.lock:
                        self.items[key] = body
                        self.making.pop(key, None)
                        while len(self.items) > self.size:
                            self.items.popitem(last=False)
        return body

    def get(self, key: Any, make: Callable[[], Any]) -> Response:
        return Response(self.body(key, lambda: json.dumps(make()).encode()), media_type="application/json")


class Server:
    """State shared by the handlers: the index, the job queue, timeline lanes recently opened."""

    def __init__(self, s: Settings) -> None:
        self.s = s
        self.csrf = secrets.token_urlsafe(32)
        self.db = Db(s.state_dir / "serve.sqlite")
        self.index = RunIndex(self.db, s.roots)
        self.output_dir = s.output_dir or s.roots[0] / "jobs"
        self.queue = JobQueue(self.db, s.jobs, s.gpus, self.output_dir, s.state_dir / "logs", on_finish=self.wake)
        self.cache_dir = s.state_dir / "timeline"
        self._lanes: OrderedDict[tuple[int, str], app_timeline.Lanes] = OrderedDict()
        self._lanes_lock = threading.Lock()
        self._building: dict[tuple[int, str], threading.Lock] = {}
        self._wake, self._stop = threading.Event(), threading.Event()
        self._scanner: threading.Thread | None = None
        self.last_scan: dict[str, Any] = {}
        self.generation = 0  # bumped when a scan changed the index
        self.answers = Answers()
        self._big: tuple[str, ...] = ()
        self._worker: ScanWorker | None = None
        if s.scan_in_child:
            self._worker = ScanWorker(self.db.path, self.index.roots)

    def open(self) -> None:
        self.queue.recover()
        self.scan()
        self.queue.start()
        self._scanner = threading.Thread(target=self._scan_loop, name="tracer-serve-index", daemon=True)
        self._scanner.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self.queue.shutdown()
        if self._worker is not None:
            self._worker.close()
        if self._scanner is not None:
            self._scanner.join(timeout=10)
        self.db.close()

    def wake(self) -> None:
        self._wake.set()

    def scan(self, in_child: bool = False) -> None:
        r = self._worker.scan() if in_child and self._worker is not None else self.index.scan()
        self._note(r)

    def _note(self, r: ScanResult) -> None:
        self._big = r.big
        if r.read or r.removed:
            self.generation += 1
        self.last_scan = {"runs": r.runs, "read": r.read, "removed": r.removed, "seconds": round(r.seconds, 3),
                          "at": time.time()}

    def _scan_loop(self) -> None:
        scanned = True  # open() ran the first scan
        while not self._stop.is_set():
            try:
                if not scanned:
                    self.scan(in_child=True)
                self._prebuild()
            except Exception as exc:
                import sys

                print(f"tracer serve: index scan failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            scanned = False
            self._wake.wait(self.s.rescan_s)
            self._wake.clear()

    def _prebuild(self) -> None:
        """Build the timeline lanes of big traces now, so their page paints at once when opened."""
        for path in self._big:
            if self._stop.is_set():
                return
            try:
                if not (self.cache_dir / f"{app_timeline.cache_key(Path(path))}.npz").is_file():
                    (run_id,), = self.db.query("SELECT id FROM runs WHERE path=?", (path,))
                    self.lanes(run_id)  # through the per-trace lock: a page opened meanwhile waits for this build
            except (TracerError, OSError, NotFound, ValueError):
                continue

    def lanes(self, run_id: int) -> tuple[tuple[int, str], app_timeline.Lanes]:
        """The run's timeline lanes and what they were built from (run id, the traces' cache key)."""
        path, _ = self.index.get(run_id)
        key = (run_id, app_timeline.cache_key(path))
        with self._lanes_lock:
            building = self._building.setdefault(key, threading.Lock())
        with building:  # one build per trace, however many clients ask for it at once
            with self._lanes_lock:
                if key in self._lanes:
                    self._lanes.move_to_end(key)
                    return key, self._lanes[key]
            lanes = app_timeline.cached_lanes(path, self.cache_dir)
            with self._lanes_lock:
                self._lanes[key] = lanes
                self._building.pop(key, None)
                while len(self._lanes) > LANES_CACHED:
                    self._lanes.popitem(last=False)
        return key, lanes


# ---- the guard: hosts, token, CSRF, headers -----------------------------------------------------

class Guard:
    """Every request: a Host this server answers to (no DNS rebinding), the token when one is set
    (header `Authorization: Bearer T` or the cookie `/?token=T` sets), and for state-changing
    methods the CSRF header and a same-origin Origin. Every response: CSP and no-sniff headers."""

    def __init__(self, app: ASGIApp, server: Server) -> None:
        self.app, self.server = app, server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        req = Request(scope)
        refusal = self._refusal(req)
        if refusal is None and self.server.s.token and req.query_params.get("token") and req.method == "GET":
            refusal = self._login(req)
        if refusal is not None:
            await _headers_app(refusal)(scope, receive, send)
            return
        await _headers_app(self.app)(scope, receive, send)

    def _refusal(self, req: Request) -> Response | None:
        host = (req.headers.get("host") or "").rsplit(":", 1)[0] if not (req.headers.get("host") or "").startswith("[") \
            else (req.headers.get("host") or "").split("]")[0] + "]"
        if "*" not in self.server.s.allowed_hosts and host not in self.server.s.allowed_hosts:
            return _error(400, f"Host {host!r} is not one this server answers to (allowed: {', '.join(self.server.s.allowed_hosts)})")
        token = self.server.s.token
        if token and not (_bearer(req, token) or _cookie(req, token) or _query(req, token)):
            return _error(401, "this server needs its token: header 'Authorization: Bearer TOKEN', or open /?token=TOKEN once")
        if req.method in UNSAFE:
            origin = req.headers.get("origin")
            if origin is not None and origin.split("://", 1)[-1] != req.headers.get("host"):
                return _error(403, f"cross-origin request refused (Origin {origin!r})")
            sent = req.headers.get("x-csrf-token", "")
            if not hmac.compare_digest(sent.encode(), self.server.csrf.encode()):
                return _error(403, "missing or wrong X-CSRF-Token header (GET /api/session gives it)")
        return None

    def _login(self, req: Request) -> Response:
        """`?token=T` once: a cookie for the pages, then the same URL without the token."""
        query = "&".join(f"{k}={v}" for k, v in req.query_params.multi_items() if k != "token")
        resp = RedirectResponse(req.url.path + (f"?{query}" if query else ""), status_code=303)
        resp.set_cookie("tracer_token", self.server.s.token or "", httponly=True, samesite="strict")
        return resp


def _bearer(req: Request, token: str) -> bool:
    got = req.headers.get("authorization", "")
    return got.startswith("Bearer ") and hmac.compare_digest(got[7:].encode(), token.encode())


def _cookie(req: Request, token: str) -> bool:
    return hmac.compare_digest(req.cookies.get("tracer_token", "").encode(), token.encode())


def _query(req: Request, token: str) -> bool:
    return req.method == "GET" and hmac.compare_digest(req.query_params.get("token", "").encode(), token.encode())


def _headers_app(app: ASGIApp) -> ASGIApp:
    """Security headers on every response, and `Server-Timing: app;dur=MS` (the request's time in
    the application, which browsers' developer tools and scripts/bench_serve.py show)."""
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        t0 = time.perf_counter()

        async def send_with(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.setdefault("headers", [])
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                            (b"server-timing", f"app;dur={(time.perf_counter() - t0) * 1000:.2f}".encode())]
            await send(message)
        await app(scope, receive, send_with)
    return wrapped


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({**header("error"), "error": message}, status_code=status)


def _handle(fn: Any) -> Any:
    """Typed errors -> HTTP: usage 400, unknown id 404, unreadable run 422, other tracer errors 500."""
    def endpoint(request: Request) -> Response:
        try:
            return fn(request)
        except UsageError as exc:
            return _error(400, str(exc))
        except NotFound as exc:
            return _error(404, str(exc))
        except TraceFormatError as exc:
            return _error(422, str(exc))
        except TracerError as exc:
            return _error(500, str(exc))
    return endpoint


def _cached(server: Server, key: Callable[[Request], Any], fn: Callable[[Request], Response],
            media_type: str = "application/json", inline: bool = False) -> Any:
    """An endpoint that answers from `server.answers` on the event loop when it can (no worker
    thread, no lock held for long), else runs `fn` in the thread pool, or on the loop too when
    `inline` (a fraction of a millisecond: one indexed query and a 16 KB read cost less than the
    trips a worker thread makes for the interpreter lock while the loop is busy)."""
    sync = _handle(fn)

    async def endpoint(request: Request) -> Response:
        try:
            body = server.answers.peek(key(request))
        except (UsageError, NotFound):
            body = None  # `fn` answers the bad request with its error
        if body is not None:
            return Response(body, media_type=media_type)
        if inline:
            return sync(request)
        response: Response = await run_in_threadpool(sync, request)
        return response
    return endpoint


class _Static(StaticFiles):
    """The shipped scripts and styles; the pages name them with the package's version (?v=), so
    browsers keep them instead of asking again on every page."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        if response.status_code == 200:
            response.headers["cache-control"] = "public, max-age=31536000, immutable"
        return response


def _list_args(request: Request) -> tuple[tuple[str, Any], ...]:
    """The run list's query (`GET /` and `GET /api/runs`), checked by the index when used."""
    q = request.query_params
    return (("kind", q.get("kind") or None), ("status", q.get("status") or None), ("text", q.get("q") or None),
            ("sort", q.get("sort", "created")), ("order", q.get("order", "desc")),
            ("offset", _int(request, "offset", 0) or 0), ("limit", _int(request, "limit", 50) or 50))


def _int(request: Request, name: str, default: int | None = None) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    if not re.fullmatch(r"-?[0-9]{1,19}", value):
        raise UsageError(f"{name}={value!r} must be an integer")
    return int(value)


def _run_id(request: Request) -> int:
    value = request.path_params["run_id"]
    if not re.fullmatch(r"[0-9]{1,12}", value):
        raise NotFound(f"no run {value!r}")
    return int(value)


# ---- handlers -----------------------------------------------------------------------------------

def build_app(settings: Settings) -> Starlette:
    server = Server(settings)

    def srv(request: Request) -> Server:
        server: Server = request.app.state.server
        return server

    def page(name: str) -> Any:
        """A page shell: the same bytes for the same path all along this server's life."""
        def handler(request: Request) -> Response:
            s = srv(request)
            return HTMLResponse(s.answers.body(("page", name, tuple(request.path_params.items())),
                                               lambda: pages.render(name, s.csrf, request.path_params)))
        return handler

    def list_page(request: Request) -> Response:
        s, args = srv(request), _list_args(request)

        def make() -> bytes:
            listing = json.loads(s.answers.body(("runs", s.generation, args), lambda: json.dumps(runs_answer(s, args)).encode()))
            return pages.render("list", s.csrf, {}, dict(listing, state=dict(args, total=listing["total"])))
        return HTMLResponse(s.answers.body(("list-page", s.generation, args), make))

    def runs_answer(s: Server, args: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
        total, rows = s.index.list(**dict(args))
        return {**header("run-list"), "total": total, "runs": rows}

    def api_session(request: Request) -> Response:
        s = srv(request)
        return JSONResponse({**header("session"), "csrf": s.csrf, "read_only": s.s.read_only, "diff": s.s.diff,
                             "jobs": _jobs_offer(s), "index": s.last_scan})

    def api_runs(request: Request) -> Response:
        s, args = srv(request), _list_args(request)
        return s.answers.get(("runs", s.generation, args), lambda: runs_answer(s, args))

    def api_run(request: Request) -> Response:
        s, run_id = srv(request), _run_id(request)
        path, row = s.index.get(run_id)
        if row["kind"] == "campaign":  # a running campaign writes through SQLite's WAL: ask the store each time
            return JSONResponse(app_runs.verdict_json(path))
        return s.answers.get(("verdict", s.generation, run_id), lambda: app_runs.verdict_json(path))

    def api_run_summary(request: Request) -> Response:
        s, run_id = srv(request), _run_id(request)
        path, row = s.index.get(run_id)
        return s.answers.get(("summary", s.generation, run_id),
                             lambda: {**header("run-summary"), "run": row,
                                      "files": [{"name": n, "bytes": b} for n, b in app_runs.artifacts(path)]})

    def api_timeline(request: Request) -> Response:
        s, run_id = srv(request), _run_id(request)
        start, end, most = _int(request, "start"), _int(request, "end"), _int(request, "max", 4000) or 4000
        _, lanes = s.lanes(run_id)
        return s.answers.get(("timeline", s.generation, run_id, start, end, most), lambda: app_timeline.window(lanes, start, end, most))

    def api_search(request: Request) -> Response:
        s, run_id = srv(request), _run_id(request)
        (_, lanes), text = s.lanes(run_id), request.query_params.get("q", "")
        return s.answers.get(("search", s.generation, run_id, text), lambda: app_timeline.search(lanes, text))

    def api_file(request: Request) -> Response:
        path, _ = srv(request).index.get(_run_id(request))
        name = request.path_params["name"]
        base = path if path.is_dir() else path.parent
        target = app_runs.inside((base,), base / name) if path.is_dir() else path
        if path.is_file() and name != path.name:
            raise NotFound(f"no file {name!r} in this run")
        if not target.is_file():
            raise NotFound(f"no file {name!r} in this run")
        return FileResponse(target, filename=target.name)

    def api_perfetto(request: Request) -> Response:
        s = srv(request)
        path, _ = s.index.get(_run_id(request))
        out = s.s.state_dir / "perfetto" / f"{app_timeline.cache_key(path)}.json"
        if not out.is_file():
            app_runs.write_perfetto_json(path, out)
        return FileResponse(out, filename=f"{path.name}.perfetto.json", media_type="application/json")

    def api_jobs(request: Request) -> Response:
        return JSONResponse({**header("job-list"), "jobs": srv(request).queue.list()})

    async def api_submit(request: Request) -> Response:
        s = srv(request)
        if s.s.read_only:
            return _error(403, "this server is read-only (--read-only): jobs cannot be submitted")
        try:
            body = json.loads(await request.body() or b"null")
        except ValueError:
            return _error(400, "the request body is not JSON")
        try:
            req = check_request(s.s.jobs, body)
            return JSONResponse(with_header("queued-job", s.queue.submit(req)), status_code=201)
        except UsageError as exc:
            return _error(400, str(exc))

    def api_job(request: Request) -> Response:
        s, job_id = srv(request), _job_id(request)
        return s.answers.get(("job", job_id, s.queue.version, _job_tick()), lambda: with_header("queued-job", s.queue.get(job_id)))

    def api_cancel(request: Request) -> Response:
        s = srv(request)
        if s.s.read_only:
            return _error(403, "this server is read-only (--read-only): jobs cannot be cancelled")
        return JSONResponse(with_header("queued-job", s.queue.cancel(_job_id(request))))

    async def api_import(request: Request) -> Response:
        s = srv(request)
        if s.s.read_only:
            return _error(403, "this server is read-only (--read-only): nothing can be imported")
        name = request.query_params.get("name", "")
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", name) or not name.lower().endswith(UPLOAD_SUFFIXES):
            return _error(400, f"name {name!r}: a file name ending in {', '.join(UPLOAD_SUFFIXES)} (letters, digits, . _ -)")
        folder = s.s.state_dir / "uploads"
        folder.mkdir(parents=True, exist_ok=True)
        dest = folder / f"{int(time.time() * 1000)}-{secrets.token_hex(4)}-{name}"
        size = 0
        try:
            with open(dest, "wb") as fh:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > s.s.upload_limit:
                        raise UsageError(f"upload larger than the limit of {s.s.upload_limit} bytes (--upload-limit-mb)")
                    fh.write(chunk)
        except UsageError as exc:
            dest.unlink(missing_ok=True)
            return _error(413, str(exc))
        if size == 0:
            dest.unlink(missing_ok=True)
            return _error(400, "an empty upload")
        job = s.queue.submit(JobRequest(action=Action.IMPORT, target=str(dest), device="cpu"))
        return JSONResponse(with_header("queued-job", job), status_code=201)

    def api_diff(request: Request) -> Response:
        from tracer.app.diff import diff_paths

        s = srv(request)
        a = _int(request, "a")
        b = _int(request, "b")
        if a is None or b is None:
            raise UsageError("give two run ids: /api/diff?a=ID&b=ID")
        (pa, _), (pb, _) = s.index.get(a), s.index.get(b)
        return JSONResponse(diff_paths(pa, pb).to_json())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.open()
        try:
            yield
        finally:
            server.close()

    routes = [
        Route("/", _cached(server, lambda r: ("list-page", server.generation, _list_args(r)), list_page, HTML)),
        Route("/runs/{run_id}", _cached(server, lambda r: ("page", "run", (("run_id", r.path_params["run_id"]),)), page("run"),
                                        HTML)),
        Route("/jobs", _cached(server, lambda r: ("page", "jobs", ()), page("jobs"), HTML)),
        Route("/api/session", _handle(api_session)),
        Route("/api/runs", _cached(server, lambda r: ("runs", server.generation, _list_args(r)), api_runs)),
        Route("/api/runs/{run_id}", _cached(server, lambda r: ("verdict", server.generation, _run_id(r)), api_run)),
        Route("/api/runs/{run_id}/summary", _cached(server, lambda r: ("summary", server.generation, _run_id(r)), api_run_summary)),
        Route("/api/runs/{run_id}/timeline", _cached(server, lambda r: (
            "timeline", server.generation, _run_id(r), _int(r, "start"), _int(r, "end"), _int(r, "max", 4000) or 4000), api_timeline)),
        Route("/api/runs/{run_id}/search", _cached(server, lambda r: (
            "search", server.generation, _run_id(r), r.query_params.get("q", "")), api_search)),
        Route("/api/runs/{run_id}/perfetto", _handle(api_perfetto)),
        Route("/api/runs/{run_id}/files/{name:path}", _handle(api_file)),
        Route("/api/jobs", _handle(api_jobs), methods=["GET"]),
        Route("/api/jobs", api_submit, methods=["POST"]),
        Route("/api/jobs/{job_id}", _cached(server, lambda r: ("job", _job_id(r), server.queue.version, _job_tick()), api_job,
                                            inline=True), methods=["GET"]),
        Route("/api/jobs/{job_id}", _handle(api_cancel), methods=["DELETE"]),
        Route("/api/import", api_import, methods=["POST"]),
        Mount("/static", _Static(directory=STATIC), name="static"),
    ]
    if settings.diff:
        routes[3:3] = [Route("/diff", _handle(page("diff"))), Route("/api/diff", _handle(api_diff))]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = server
    app.add_middleware(_GuardFactory, server=server)
    return app


class _GuardFactory(Guard):
    def __init__(self, app: ASGIApp, server: Server) -> None:
        super().__init__(app, server)


def _job_tick() -> int:
    """The time slot a job's answer belongs to (answers in one slot are the same)."""
    return int(time.monotonic() / JOB_FRESH_S)


def _job_id(request: Request) -> int:
    value = request.path_params["job_id"]
    if not re.fullmatch(r"[0-9]{1,12}", value):
        raise NotFound(f"no job {value!r}")
    return int(value)


def _jobs_offer(s: Server) -> dict[str, Any]:
    cfg = s.s.jobs
    return {"actions": [a.value for a in cfg.actions], "workloads": list(cfg.workloads),
            "campaigns": list(cfg.campaigns), "commands": sorted(cfg.commands), "gpus": list(s.s.gpus),
            "enabled": not s.s.read_only}
