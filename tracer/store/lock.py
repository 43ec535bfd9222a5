"""The run lock of a campaign store: one `campaign run` at a time per store. An flock on a file
beside the store, held while the run lives and released by the kernel however it ends (kill -9
included); the file names who holds it, so a second run can say which run is in flight."""
from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import IO

from tracer.errors import OutputError, UsageError


class RunLock:
    def __init__(self, path: Path, fh: IO[str]) -> None:
        self.path, self._fh = path, fh

    def release(self) -> None:
        self._fh.close()  # closing the file drops the flock


def lock_path(store: Path) -> Path:
    return store.with_name(f"{store.name}.lock")


def run_lock(store: Path) -> RunLock:
    """Take the store's run lock or say who holds it (UsageError)."""
    path = lock_path(store)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a+")
    except OSError as exc:
        raise OutputError(f"cannot create the run lock {path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise UsageError(f"{store} is in flight: another `campaign run` holds it ({holder}); "
                         f"wait for it to finish or follow it with `tracer campaign status {store}`") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    fh.flush()
    return RunLock(path, fh)
