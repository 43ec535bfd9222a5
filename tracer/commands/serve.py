"""`tracer serve`: the runs under some folders, their timelines and a job queue, in a browser."""
from __future__ import annotations

import argparse
from pathlib import Path

from tracer.errors import UsageError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="browse runs, timelines and jobs in a browser (docs/serve.md)")
    p.add_argument("--runs", action="append", type=Path, help="a folder of runs (repeatable; default ./runs)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs --token)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--token", help="every request must carry it (Authorization: Bearer TOKEN, or /?token=TOKEN once)")
    p.add_argument("--token-file", type=Path, help="read the token from this file")
    p.add_argument("--read-only", action="store_true", help="no job submission, cancel or import")
    p.add_argument("--jobs", type=Path, help="the job allow-list (YAML; default: the built-in workloads and campaigns)")
    p.add_argument("--gpus", help="GPU indices of the job queue, e.g. 0,1 (default: every GPU the driver sees; 'none')")
    p.add_argument("--state", type=Path, help="index, job state and caches (default RUNS/.tracer-serve)")
    p.add_argument("--upload-limit-mb", type=int, default=256, help="largest trace upload (default 256)")
    p.add_argument("--rescan-s", type=float, default=10.0, help="seconds between index rescans (default 10)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from tracer.serve.app import STATE_NAME, Settings, build_app

    roots = tuple(r.resolve() for r in (args.runs or [Path("runs")]))
    for r in roots:
        if not r.is_dir():
            raise UsageError(f"--runs {r}: not a folder")
    token = _token(args)
    if args.host not in LOOPBACK and not token:
        raise UsageError(f"--host {args.host}: binding beyond this machine needs --token or --token-file")
    if not 1 <= args.port <= 65535 or not 1 <= args.upload_limit_mb <= 65536 or not 0.5 <= args.rescan_s <= 3600:
        raise UsageError("--port must be 1..65535, --upload-limit-mb 1..65536, --rescan-s 0.5..3600")
    settings = Settings(roots=roots, state_dir=(args.state or roots[0] / STATE_NAME).resolve(), jobs=_jobs(args.jobs),
                        gpus=_gpus(args.gpus), token=token, read_only=args.read_only,
                        allowed_hosts=("*",) if token and args.host not in LOOPBACK else ("127.0.0.1", "localhost", "[::1]"),
                        upload_limit=args.upload_limit_mb << 20, rescan_s=args.rescan_s, diff=_has_diff())
    app = build_app(settings)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"tracer serve: http://{shown}:{args.port}/ ({', '.join(map(str, roots))}; state in {settings.state_dir})", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def _token(args: argparse.Namespace) -> str | None:
    token = args.token
    if args.token_file is not None:
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            raise UsageError(f"--token-file {args.token_file}: {exc.strerror}") from exc
    if token is not None and len(token) < 16:
        raise UsageError("the token must be at least 16 characters (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
    return token


def _jobs(path: Path | None):  # type: ignore[no-untyped-def]
    from tracer.serve.config import default_jobs, load_jobs

    return load_jobs(path) if path is not None else default_jobs()


def _gpus(text: str | None) -> tuple[int, ...]:
    if text == "none":
        return ()
    if text is not None:
        try:
            return tuple(int(g) for g in text.split(","))
        except ValueError:
            raise UsageError(f"--gpus {text!r}: GPU indices like 0,1, or none") from None
    from tracer.gpu import probe

    return tuple(range(probe().devices or 0))


def _has_diff() -> bool:
    import importlib.util

    return importlib.util.find_spec("tracer.app.diff") is not None
