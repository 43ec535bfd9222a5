"""The one way tracer opens an SQLite file (a trace, a campaign store, a sanitizer plan's scratch
database): by URI built from the quoted absolute path, so a name holding `%41`, `?` or `#` opens
that very file, never another one and never a new empty one. Open failures are classified: a
lock held by another process, a WAL database in a folder SQLite cannot write its `-shm` into, a
hot journal left by a crashed writer, and real corruption each get their own one-line message."""
from __future__ import annotations

import os
import sqlite3
from enum import Enum
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from tracer.errors import TraceFormatError

LOCK_WAIT_S = 1.0  # how long a reader waits for another process's lock before saying so
SQLITE_MAGIC = b"SQLite format 3\x00"
WAL_MODE = 2  # header bytes 18 and 19 (file format write/read version) in WAL mode


class Mode(str, Enum):
    READ = "ro"
    WRITE = "rw"
    CREATE = "rwc"


def sqlite_uri(path: Path, mode: Mode) -> str:
    """`file:` URI of exactly this path: every byte but `/` is percent-encoded (of the name's bytes as
    the file system holds them, so a name that is not UTF-8 opens too)."""
    return f"file:{quote(os.fsencode(os.path.abspath(path)), safe='/')}?mode={mode.value}"


def open_sqlite(path: Path, mode: Mode = Mode.READ, timeout: float = LOCK_WAIT_S,
                isolation_level: Literal["", "DEFERRED", "EXCLUSIVE", "IMMEDIATE"] | None = "") -> sqlite3.Connection:
    """A connection to `path` itself; sqlite3 errors escape (callers classify them with
    `open_error`, after the first query, which is where SQLite reports most of them)."""
    return sqlite3.connect(sqlite_uri(path, mode), uri=True, timeout=timeout, isolation_level=isolation_level,  # type: ignore[arg-type]  # typeshed lacks "" (autocommit off, no BEGIN kind)
                           check_same_thread=False)


def _wal_header(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[18] == WAL_MODE and head[19] == WAL_MODE


def open_problem(path: Path, exc: sqlite3.Error) -> str:
    """What went wrong opening `path`, in words a user can act on."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    folder = path.resolve().parent
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED") or "locked" in str(exc):
        return ("locked by another process (a writer holds it; wait for it to finish, or copy the file "
                "and read the copy)")
    if name == "SQLITE_READONLY_ROLLBACK" or Path(f"{path}-journal").exists() and name.startswith("SQLITE_READONLY"):
        return (f"has a hot journal ({path.name}-journal, left by a writer that crashed) that must be rolled back "
                "first: open it once with write access (sqlite3 FILE 'PRAGMA integrity_check'), or remove the journal "
                "if the half-written transaction is unwanted")
    if _wal_header(path) and (name.startswith("SQLITE_CANTOPEN") or name.startswith("SQLITE_READONLY")):  # _DIRECTORY
        return (f"a WAL-mode database in a folder SQLite cannot write its {path.name}-shm into ({folder} is read-only "
                "for you): copy the file into a writable folder, or convert it there with "
                "`sqlite3 FILE 'PRAGMA journal_mode=DELETE'`")
    if name.startswith("SQLITE_CANTOPEN") or name.startswith("SQLITE_PERM") or name.startswith("SQLITE_READONLY"):
        return f"cannot be opened ({exc}; check the permissions of the file and of {folder})"
    return f"corrupt SQLite file ({exc})"


def open_error(path: Path, exc: sqlite3.Error) -> TraceFormatError:
    return TraceFormatError(f"{path}: {open_problem(path, exc)}")
