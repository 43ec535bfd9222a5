"""Starting `tracer serve` from its options: the settings checked (a bind beyond this machine needs
a token), then uvicorn until Ctrl-C or SIGTERM, after which it shuts down gracefully (running jobs
stopped and marked interrupted, state committed) and the command exits 0."""
from __future__ import annotations

import importlib.util
import os
import signal
from pathlib import Path

from tracer.errors import UsageError
from tracer.serve.app import STATE_NAME, Settings, build_app
from tracer.serve.config import JobsConfig, default_jobs, load_jobs

LOOPBACK = ("127.0.0.1", "localhost", "::1")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
MIN_TOKEN = 16


def settings(*, runs: list[Path] | None, host: str, port: int, token: str | None, token_file: Path | None,
             read_only: bool, jobs: Path | None, gpus: str | None, state: Path | None, upload_limit_mb: int,
             rescan_s: float) -> Settings:
    roots = tuple(r.resolve() for r in (runs or [Path("runs")]))
    for r in roots:
        if not r.is_dir():
            raise UsageError(f"--runs {r}: not a folder")
    secret = read_token(token, token_file)
    if host not in LOOPBACK and not secret:
        raise UsageError(f"--host {host}: binding beyond this machine needs --token or --token-file")
    if not 1 <= port <= 65535 or not 1 <= upload_limit_mb <= 65536 or not 0.5 <= rescan_s <= 3600:
        raise UsageError("--port must be 1..65535, --upload-limit-mb 1..65536, --rescan-s 0.5..3600")
    return Settings(roots=roots, state_dir=(state or roots[0] / STATE_NAME).resolve(), jobs=jobs_config(jobs),
                    gpus=parse_gpus(gpus), token=secret, read_only=read_only,
                    allowed_hosts=("*",) if secret and host not in LOOPBACK else LOOPBACK_HOSTS,
                    upload_limit=upload_limit_mb << 20, rescan_s=rescan_s,
                    diff=importlib.util.find_spec("tracer.app.diff") is not None)


def read_token(token: str | None, token_file: Path | None) -> str | None:
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise UsageError(f"--token-file {token_file}: {exc.strerror}") from exc
    if token is not None and len(token) < MIN_TOKEN:
        raise UsageError(f"the token must be at least {MIN_TOKEN} characters "
                         "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
    return token


def jobs_config(path: Path | None) -> JobsConfig:
    return load_jobs(path) if path is not None else default_jobs()


def parse_gpus(text: str | None, visible: str | None = None) -> tuple[int, ...]:
    """The GPUs the job queue hands out (a job gets CUDA_VISIBLE_DEVICES=N): --gpus, else those the
    server's own CUDA_VISIBLE_DEVICES names, else every GPU the driver sees."""
    if text == "none":
        return ()
    if text is not None:
        try:
            return tuple(int(g) for g in text.split(","))
        except ValueError:
            raise UsageError(f"--gpus {text!r}: GPU indices like 0,1, or none") from None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if visible is not None and visible.strip():
        try:
            return tuple(int(g) for g in visible.split(",") if g.strip())
        except ValueError:
            raise UsageError(f"CUDA_VISIBLE_DEVICES={visible!r} names GPUs other than by index: "
                             "give the queue's GPUs with --gpus 0,1") from None
    from tracer.gpu import probe

    return tuple(range(probe().devices or 0))


class _Stopped(Exception):
    pass


def _stopped(signum: int, frame: object) -> None:
    raise _Stopped(signum)


def serve(s: Settings, host: str, port: int) -> None:
    import uvicorn

    app = build_app(s)
    shown = f"[{host}]" if ":" in host else host
    print(f"tracer serve: http://{shown}:{port}/ ({', '.join(map(str, s.roots))}; state in {s.state_dir})", flush=True)
    previous = {sig: signal.signal(sig, _stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:  # uvicorn stops gracefully, restores these handlers, then raises the signal again
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    except _Stopped as stop:
        print(f"tracer serve: stopped by {signal.Signals(stop.args[0]).name}", flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
