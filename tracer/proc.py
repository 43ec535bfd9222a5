"""The one place tracer runs other programs: argv lists, output streamed to files, a timeout
that kills the whole process group."""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracer.errors import ToolMissingError


@dataclass(frozen=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int | None  # None when killed at the timeout
    timed_out: bool
    seconds: float
    stdout_path: Path
    stderr_path: Path

    @property
    def signal(self) -> int | None:
        """The signal that ended the process, if one did."""
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    stdout_path: Path,
    stderr_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcResult:
    """Run argv in its own process group; at the timeout SIGTERM the group, then SIGKILL it."""
    start = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise ToolMissingError(f"cannot run {argv[0]!r}: not found") from exc
        try:
            code: int | None = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            code, timed_out = None, True
        except BaseException:
            _kill_group(proc)
            raise
    return ProcResult(tuple(argv), code, timed_out, time.monotonic() - start, stdout_path, stderr_path)


class Started:
    """A long-lived process from `start`: in its own group, output streamed to a file."""

    def __init__(self, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        self.popen, self.log_path = popen, log_path

    def poll(self) -> int | None:
        """Its exit code, or None while it runs."""
        return self.popen.poll()

    def stop(self) -> None:
        """SIGTERM its whole process group, then SIGKILL what is left."""
        _kill_group(self.popen)


def start(argv: Sequence[str], *, log_path: Path, env: Mapping[str, str] | None = None,
          cwd: Path | None = None) -> Started:
    """Start argv without waiting (stdout and stderr into log_path), in its own process group."""
    with open(log_path, "wb") as log:
        try:
            popen = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True)
        except FileNotFoundError as exc:
            raise ToolMissingError(f"cannot run {argv[0]!r}: not found") from exc
    return Started(popen, log_path)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@dataclass(frozen=True)
class Captured:
    returncode: int | None
    timed_out: bool
    stdout: str
    stderr: str


def capture(argv: Sequence[str], *, timeout: float = 120.0) -> Captured:
    """Run a short tool; its output is read back and its temp folder removed."""
    with tempfile.TemporaryDirectory(prefix="tracer-") as folder:
        res = run(argv, timeout=timeout, stdout_path=Path(folder) / "stdout", stderr_path=Path(folder) / "stderr")
        return Captured(res.returncode, res.timed_out, res.stdout(), res.stderr())
