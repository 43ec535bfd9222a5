"""Fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) in a traced process: write what CUPTI
recorded, then die of the same signal, as the program would have without tracer.

Python's own signal handlers cannot do this: its C handler only sets a flag and returns, so a
fault in C code runs again (Python "hangs"), and an abort() dies before any Python code runs. So
the handler is a C-level one (sigaction through ctypes) that calls back into Python, with the care
a signal handler needs:
- the previous action is restored first: a second fault (the flush itself faulting, a stack
  overflow) ends the process at once, and a handler installed before tracer's (faulthandler's)
  still runs after it;
- an alarm of WATCHDOG_S (SIGALRM at its default action: the process ends) bounds a flush that
  cannot finish (the fault hit inside a lock the flush needs: the driver's, the allocator's);
- the work is one forced CUPTI flush and one committed batch (Session.flush_at_death), no trace
  completion: `trace run` completes the partial file, as for a process killed by SIGKILL;
- then the signal is raised again on this thread: pending until the handler returns, it ends the
  process under the restored action (a fault re-executed there does too).
Nothing is installed for a signal the program already handles in Python (signal.getsignal)."""
from __future__ import annotations

import ctypes
import ctypes.util
import signal
from collections.abc import Callable
from typing import Any

SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT)
WATCHDOG_S = 10


class _SigAction(ctypes.Structure):
    """glibc's struct sigaction (x86_64 and aarch64): handler, 1024-bit mask, flags, restorer."""
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
_state: dict[str, Any] = {"libc": None, "previous": {}, "callback": None, "on_fatal": None}


def _libc() -> Any:
    if _state["libc"] is None:
        _state["libc"] = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _state["libc"]


def _restore(libc: Any, signum: int) -> None:
    previous = _state["previous"].pop(signum, None)
    if previous is not None:
        libc.sigaction(signum, ctypes.byref(previous), None)


def _on_signal(signum: int) -> None:
    libc = _libc()
    _restore(libc, signum)
    default = _SigAction()  # handler 0: SIG_DFL
    libc.sigaction(signal.SIGALRM, ctypes.byref(default), None)
    libc.alarm(WATCHDOG_S)
    try:
        on_fatal = _state["on_fatal"]
        if on_fatal is not None:
            on_fatal(signum)
    except BaseException:
        pass
    getattr(libc, "raise")(signum)


def install(on_fatal: Callable[[int], None]) -> tuple[int, ...]:
    """Handle the fatal signals the program leaves at their default; returns those handled
    (none when libc's sigaction cannot be reached: the process is then traced as before)."""
    try:
        libc = _libc()
    except OSError:
        return ()
    if _state["callback"] is None:
        _state["callback"] = _HANDLER(_on_signal)  # kept alive: libc holds only its address
    _state["on_fatal"] = on_fatal
    action = _SigAction()
    action.handler = ctypes.cast(_state["callback"], ctypes.c_void_p).value
    done = []
    for signum in SIGNALS:
        if signum in _state["previous"] or signal.getsignal(signum) != signal.SIG_DFL:
            continue
        previous = _SigAction()
        if libc.sigaction(int(signum), ctypes.byref(action), ctypes.byref(previous)) == 0:
            _state["previous"][int(signum)] = previous
            done.append(int(signum))
    return tuple(done)


def uninstall() -> None:
    """The previous actions back (after the trace is written: a crash in the interpreter's
    teardown must not call into Python)."""
    if _state["libc"] is None:
        return
    for signum in list(_state["previous"]):
        _restore(_state["libc"], signum)
    _state["on_fatal"] = None


def installed() -> tuple[int, ...]:
    return tuple(_state["previous"])

