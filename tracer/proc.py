"""The one place tracer runs other programs: argv lists, output streamed to files, a timeout
that kills the whole process group."""
from __future__ import annotations

import math
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracer.errors import TimedOut, ToolMissingError, UsageError

GRACE_S = 5.0  # after SIGTERM, how long the group may take to exit before SIGKILL


@dataclass(frozen=True, kw_only=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int | None  # None when killed at the timeout
    timed_out: bool
    seconds: float
    stdout_path: Path
    stderr_path: Path
    limit_s: float = 0.0  # the timeout it ran under
    interrupted: bool = False  # stopped at Ctrl-C (KeyboardInterrupt in tracer): the group was ended as at a timeout
    detached: bool = False  # left running at its stop_after (its traces finished): returncode None

    @property
    def stopped(self) -> str:
        """How tracer ended the run early: "timeout", "interrupt", "stop-after", or "" (it exited)."""
        return "timeout" if self.timed_out else "interrupt" if self.interrupted else "stop-after" if self.detached else ""

    @property
    def signal(self) -> int | None:
        """The signal that ended the process, if one did."""
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


MAX_TIMEOUT_S = 30 * 86400  # a month; waits past threading.TIMEOUT_MAX (292 years) raise OverflowError


def check_timeout(value: object) -> float:
    """A timeout in seconds: a finite number above 0 (nan, inf, 0 and negatives are refused)."""
    try:
        seconds = float(value)  # type: ignore[arg-type]  # any user value is tried; what float() refuses is reported below
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT_S):
        raise UsageError(f"--timeout {value!r} must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:,} "
                         "(30 days), e.g. 1800")
    return seconds


def raise_if_timed_out(res: ProcResult, what: str, where: Path | None = None) -> None:
    """A run killed at its timeout is TimedOut (exit 8), never a result."""
    if res.timed_out:
        logs = f"; its output is in {where}" if where is not None else ""
        raise TimedOut(f"{what} was killed at its --timeout of {res.limit_s:g} s (the whole process group){logs}")


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    stdout_path: Path,
    stderr_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    linger: Callable[[float, int], None] | None = None,
    stop_after: float | None = None,
    on_stop: Callable[[float], None] | None = None,
    interruptible: bool = False,
) -> ProcResult:
    """Run argv in its own process group; at the timeout SIGTERM the group, then SIGKILL it. When
    the direct child exits, whatever it left running in its group is ended the same way, after
    `linger(deadline, pid)` returns where given (a caller waiting for its leftovers to finish their
    work, at most until `deadline`, the time.monotonic() of the timeout; `pid`: the direct child's,
    also the id of the session and group its leftovers are in). Ctrl-C (KeyboardInterrupt) ends
    the group; `interruptible`: then returns as at the timeout (`interrupted`), else re-raises.
    `stop_after` (seconds, before the timeout): `on_stop(deadline)` is called then and the command
    is left running (`detached`), never killed."""
    limit = check_timeout(timeout)
    detach_at = stop_after  # checked by the caller (CaptureRequest)
    start = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            proc = subprocess.Popen(
                list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise ToolMissingError(f"cannot run {argv[0]!r}: not found") from exc
        code: int | None = None
        timed_out = interrupted = detached = False
        try:
            code = proc.wait(timeout=min(limit, detach_at) if detach_at is not None else limit)
            ended = time.monotonic()
            if linger is not None:
                linger(start + limit, proc.pid)
        except subprocess.TimeoutExpired:
            ended = time.monotonic()
            detached = detach_at is not None and detach_at < limit
            timed_out = not detached
            if detached and on_stop is not None:
                on_stop(start + limit)
        except KeyboardInterrupt:
            if not interruptible:
                _kill_group(proc)
                raise
            interrupted, ended = True, time.monotonic()
        finally:
            if not detached:
                _kill_group(proc)
    return ProcResult(argv=tuple(argv), returncode=code, timed_out=timed_out, seconds=ended - start, stdout_path=stdout_path, stderr_path=stderr_path,
                      limit_s=limit, interrupted=interrupted, detached=detached)


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
    """SIGTERM the group, wait until no member runs, then SIGKILL what is left. The group is
    watched, not just the direct child: a grandchild that ignores SIGTERM must not survive."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(proc):
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + GRACE_S
        while _group_alive(proc) and time.monotonic() < deadline:
            time.sleep(0.05)
    proc.poll()


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """Does any process of the group (its id is the child's pid) still run? Zombies do not count."""
    proc.poll()  # reap the direct child when it has exited
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):  # no way to tell zombies apart: the group exists
        return True
    return any(_pgrp_state(pid) == (proc.pid, True) for pid in _pids())


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def _pgrp_state(pid: int) -> tuple[int, bool] | None:
    """(process group, running) of a pid from /proc, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[2]), fields[0] != b"Z"


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


def start_ticks(pid: int) -> int | None:
    """When a process started (clock ticks since boot, /proc/PID/stat field 22): with its pid, it
    names one process across pid reuse. None when it is gone or /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def stop_orphan_group(pid: int, ticks: int | None) -> bool:
    """SIGKILL the process group a `start`ed process led (it led its own session) when that very
    process still runs (same start ticks); a server that died left it without a parent to stop it.
    True when a group was killed."""
    if ticks is None or start_ticks(pid) != ticks:
        return False
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True
