"""One capture session per traced Python process, started by the bootstrap
(tracer/capture/boot/sitecustomize.py) when TRACER_CAPTURE_DIR is set.

Each process writes `<dir>/<host>-<pid>[-r<RANK>].json` at start (a marker: the process ran) and
rewrites it at exit, after `<stem>.sqlite` (temp name, renamed when complete). A process never
writes another's files: a fork child starts a fresh session under its own pid and drops what it
inherited. Exit paths: atexit; multiprocessing's finalizers in fork children (they leave with
os._exit); SIGTERM when the program has no handler of its own (torchrun stops its workers so).
SIGKILL and os._exit elsewhere leave the marker alone: the process died without writing."""
from __future__ import annotations

import atexit
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tracer.capture.options import ENV_DIR, ENV_OPTIONS, CaptureOptions

RANK_VARS = (("rank", ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")),
             ("local_rank", ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK")),
             ("world_size", ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")))

_session: Session | None = None


def _env_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def identity() -> dict[str, Any]:
    info: dict[str, Any] = {"pid": os.getpid(), "ppid": os.getppid(), "host": socket.gethostname()}
    for key, names in RANK_VARS:
        info[key] = _env_int(names)
    return info


def file_stem(host: str, pid: int, rank: int | None) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", host) or "host"
    return f"{safe}-{pid}" + (f"-r{rank}" if rank is not None else "")


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)


class Session:
    def __init__(self, folder: Path, options: CaptureOptions) -> None:
        from tracer.capture.backends import make_backend

        self.folder, self.options = folder, options
        self.info = identity()
        self.backend = make_backend(options, self.info["pid"])
        self.memory = None
        if options.memory:
            from tracer.capture.memory import MemoryRecorder

            b = self.backend
            self.memory = MemoryRecorder(b.clock, b.push, b.pop, devices=options.devices)
        self.finished = False
        self.forked = False
        self.exception: str | None = None
        self.lock = threading.RLock()

    @property
    def stem(self) -> str:
        return file_stem(self.info["host"], self.info["pid"], self.info["rank"])

    def clock_pair(self) -> list[int]:
        return [int(self.backend.clock()), time.time_ns()]

    def marker(self) -> dict[str, Any]:
        return {**self.info, "file": self.stem, "argv": list(getattr(sys, "orig_argv", sys.argv)), "executable": sys.executable,
                "backend": self.backend.name, "memory": self.options.memory, "state": "running",
                "clock_start": self.clock_pair(), "fork_child": self.forked}

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.started = self.marker()
        write_json(self.folder / f"{self.stem}.json", self.started)
        self.backend.start(self.memory)
        if self.memory is not None:
            from tracer.capture.torch_mode import install

            install(self.memory, lambda exc: self.memory.count_error("torch_mode", exc))  # type: ignore[union-attr]

    def after_fork(self) -> None:
        """In the child: a fresh session under the child's pid; nothing of the parent's is kept."""
        self.lock = threading.RLock()
        self.info = {**identity(), "fork_parent": self.info["pid"]}
        self.forked = True
        self.finished = False
        self.backend.after_fork(self.info["pid"], int(self.backend.clock()))
        if self.memory is not None:
            self.memory.reset_after_fork()
        self.started = self.marker()
        write_json(self.folder / f"{self.stem}.json", self.started)

    def finish(self, ended: str, exit_code: int | None = None) -> None:
        """Write the trace, then the final marker; at most once per process, never raising. A
        second caller (the SIGTERM watcher and the handler) waits until the first has written."""
        with self.lock:
            if self.finished or self.info["pid"] != os.getpid():
                return
            self.finished = True
            try:
                self._write(ended, exit_code)
            except Exception as exc:  # the program's exit is not ours to spoil: one line on stderr
                print(f"tracer: capture of pid {os.getpid()} not written: {type(exc).__name__}: {exc}", file=sys.stderr)

    def _write(self, ended: str, exit_code: int | None) -> None:
        from tracer.capture.nsys_schema import write_sqlite

        rec, memory2 = self.backend.stop(forked=self.forked, quick=ended == "sigterm")
        if self.memory is not None:
            self.memory.finish(rec, memory2)
        rec.pid = self.info["pid"]
        rec.meta["TRACER_PROCESS"] = self.stem
        trace = self.folder / f"{self.stem}.sqlite"
        write_sqlite(rec, trace, target_exit=exit_code, producer=self.backend.name)
        write_json(self.folder / f"{self.stem}.json", {
            **self.started, "state": "exited", "ended": ended, "exit": exit_code, "exception": self.exception,
            "clock_end": self.clock_pair(), "kernels": len(rec.kernels), "trace": trace.name,
            "dist_rank": _dist_rank(), "errors": {k: f"{n}: {first}" for k, (n, first) in rec.errors.items()},
        })


def _dist_rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    try:
        return int(dist.get_rank()) if dist is not None and dist.is_initialized() else None
    except Exception:
        return None


def current() -> Session | None:
    return _session


def memory_recorder() -> Any:
    """The recorder of this process's session when it records memory (tracer's launcher asks)."""
    s = _session
    return s.memory if s is not None and s.info["pid"] == os.getpid() else None


# --- exit paths ---------------------------------------------------------------------------------
def _at_exit() -> None:
    if _session is not None:
        _session.finish("atexit", 1 if _session.exception else None)


def _on_sigterm(signum: int, frame: Any) -> None:
    if _session is not None:
        _session.finish("sigterm", 128 + signum)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _watch_sigterm(fd: int) -> None:
    """Python runs signal handlers on the main thread only, between bytecodes: a main thread
    blocked in C (a collective waiting for a dead rank, a device sync) never gets there. Python's
    C-level handler also writes the signal number to the wakeup fd, read here on another thread."""
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGTERM in data and _session is not None and signal.getsignal(signal.SIGTERM) is _on_sigterm:
            _session.finish("sigterm", 128 + signal.SIGTERM)
            os._exit(128 + signal.SIGTERM)


def _install_sigterm() -> None:
    """Only when the program has no SIGTERM handler (and no wakeup fd) of its own."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    r, w = os.pipe()
    os.set_blocking(w, False)
    if signal.set_wakeup_fd(w, warn_on_full_buffer=False) != -1:  # someone else's (asyncio): give it back
        signal.set_wakeup_fd(-1)
        os.close(r)
        os.close(w)
        return
    threading.Thread(target=_watch_sigterm, args=(r,), daemon=True, name="tracer-sigterm").start()


def _excepthook(previous: Any) -> Any:
    def hook(kind: Any, value: Any, tb: Any) -> None:
        if _session is not None and not issubclass(kind, SystemExit):
            _session.exception = f"{kind.__name__}: {value}"[:300]
        previous(kind, value, tb)

    return hook


def _after_fork_child() -> None:
    if _session is None:
        return
    try:
        _session.after_fork()
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:  # the watcher thread did not survive the fork
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            _install_sigterm()
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:  # its fork children leave through os._exit, after its finalizers
            mp_util.register_after_fork(_session, _finalize_in_mp_child)
    except Exception as exc:
        print(f"tracer: capture of fork child {os.getpid()} not started: {exc}", file=sys.stderr)


def _finalize_in_mp_child(session: Session) -> None:
    """Run by multiprocessing in its fork child after it cleared the finalizers it inherited."""
    import multiprocessing.util

    multiprocessing.util.Finalize(None, session.finish, args=("finalizer",), exitpriority=-100)


def start_session(folder: Path, options: CaptureOptions) -> Session:
    global _session
    session = Session(folder, options)
    _session = session
    session.start()
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_after_fork_child)
    sys.excepthook = _excepthook(sys.excepthook)
    _install_sigterm()
    return session


def start_from_env() -> Session | None:
    """The bootstrap's entry point: a session when TRACER_CAPTURE_DIR is set, else nothing."""
    global _session
    folder = os.environ.get(ENV_DIR)
    if not folder or _session is not None:
        return None
    try:
        return start_session(Path(folder), CaptureOptions.from_env(os.environ.get(ENV_OPTIONS)))
    except Exception as exc:  # the process still says it ran, and why it is not traced
        _session = None
        info = identity()
        write_json(Path(folder) / f"{file_stem(info['host'], info['pid'], info['rank'])}.json",
                   {**info, "argv": list(getattr(sys, "orig_argv", sys.argv)), "state": "capture_failed",
                    "error": f"{type(exc).__name__}: {exc}"[:500]})
        raise
