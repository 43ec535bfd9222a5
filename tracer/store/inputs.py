"""Bounded reads of the files tracer is given or finds in run directories. What is there is looked
at before it is opened (stat) and again once open (fstat of an fd opened with O_NONBLOCK, so a
FIFO swapped in between never blocks): a FIFO, a
device (/dev/zero, /dev/urandom), a socket or a directory, directly or through a symlink, is
refused naming what it is. A file is read only up to its stated limit, and JSON only to a stated
nesting depth; each refusal is one line."""
from __future__ import annotations

import gzip
import io
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from tracer import jsonkeys
from tracer.errors import TraceFormatError, TracerError

KB, MB = 1 << 10, 1 << 20
RUN_FILE_LIMIT = 4 * MB  # a process marker, command.json, environment.json, verdict.json, a store's profile
JSON_DEPTH_LIMIT = 64  # nothing tracer writes nests deeper than 8
ErrorType = Callable[[str], TracerError]


def kind_of(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return None if stat.S_ISREG(mode) else "not a regular file"


def not_a_file(path: Path, mode: int, what: str) -> str | None:
    """The refusal for a path that is not a regular file (through symlinks: 'X -> Y is a FIFO')."""
    kind = kind_of(mode)
    if kind is None:
        return None
    via = f" (a symlink to {os.path.realpath(path)})" if os.path.islink(path) else ""
    return f"{path}{via} is {kind}, not {what}"


def check_file(path: Path, what: str = "a regular file", error: ErrorType = TraceFormatError) -> os.stat_result:
    """stat(path) for a path that must be a readable regular file; never opens it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        broken = " (a symlink to a missing file)" if os.path.islink(path) else ""
        raise error(f"{path}: no such file{broken}") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    problem = not_a_file(path, st.st_mode, what)
    if problem:
        raise error(problem)
    return st


def read_limited(path: Path, limit: int, what: str, error: ErrorType = TraceFormatError) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is one error, at once."""
    return _read(path, limit, what, error, whole=True)


def read_head(path: Path, size: int, what: str, error: ErrorType = TraceFormatError) -> bytes:
    """The first `size` bytes of a regular file (a magic number); anything else is one error, at once."""
    return _read(path, size, what, error, whole=False)


def _read(path: Path, limit: int, what: str, error: ErrorType, whole: bool) -> bytes:
    """stat before open (opening some devices does something), fstat after it (the path may have
    changed between the two)."""
    check_file(path, what, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path} is a directory, not {what}") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        problem = not_a_file(path, st.st_mode, what)
        if problem:
            raise error(problem)
        if whole and st.st_size > limit:
            raise error(f"{path}: {st.st_size:,} bytes, more than {what} may be ({size_words(limit)})")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1 if whole else limit)
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if whole and len(data) > limit:
        raise error(f"{path}: grew past {size_words(limit)} while it was read ({what})")
    return data


def size_words(n: int) -> str:
    return f"{n // MB} MB" if n >= MB and n % MB == 0 else f"{n // KB} kB" if n % KB == 0 else f"{n} bytes"


def json_depth_over(data: Any, limit: int) -> bool:
    """Whether a decoded JSON value nests deeper than `limit` (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                return True
            children = value.values() if isinstance(value, dict) else value
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_json(text: str | bytes, where: str, what: str, error: ErrorType = TraceFormatError,
               depth: int = JSON_DEPTH_LIMIT) -> Any:
    """json.loads with every failure one error: malformed, not UTF-8, a key repeated in one object
    (tracer.jsonkeys), or nested deeper than `depth` (Python's own decoder gives up near 1,000 levels
    with RecursionError, which never escapes)."""
    try:
        data = jsonkeys.loads(text)
    except RecursionError:
        raise error(f"{where}: {what} nested deeper than {depth} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(f"{where}: not readable JSON ({what}): {str(exc)[:120]}") from None
    if json_depth_over(data, depth):
        raise error(f"{where}: {what} nested deeper than {depth} levels")
    return data


def load_json(path: Path, what: str, limit: int = RUN_FILE_LIMIT, error: ErrorType = TraceFormatError,
              depth: int = JSON_DEPTH_LIMIT) -> Any:
    """A JSON file of at most `limit` bytes and `depth` levels, decoded; one error otherwise."""
    return parse_json(read_limited(path, limit, what, error), str(path), what, error, depth)


def load_json_object(path: Path, what: str, limit: int = RUN_FILE_LIMIT, error: ErrorType = TraceFormatError) -> dict[str, Any]:
    data = load_json(path, what, limit, error)
    if not isinstance(data, dict):
        raise error(f"{path}: {what} is a JSON {type(data).__name__}, not an object")
    return data


GZIP_RATIO_LIMIT = 200  # a synthetic Kineto trace of 200,000 kernels gzips 23 times, 10M empty events 1,027 times
GZIP_FREE_BYTES = 1 * MB  # expanded bytes read before the ratio is checked (the reader takes 4M characters at once)


class _GzipGuard(io.RawIOBase):
    """A gzip stream that stops, with one error, once it has expanded past GZIP_FREE_BYTES at more
    than GZIP_RATIO_LIMIT times the compressed bytes read: a bomb is refused in a fraction of a
    second, never expanded."""

    def __init__(self, raw: BinaryIO, path: Path, what: str, error: ErrorType) -> None:
        super().__init__()
        self.raw, self.gz, self.out = raw, gzip.GzipFile(fileobj=raw), 0
        self.where, self.what, self.error = path, what, error

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        n = self.gz.readinto(buf)
        self.out += n
        packed = max(self.raw.tell(), 1)
        if self.out > GZIP_FREE_BYTES and self.out > GZIP_RATIO_LIMIT * packed:
            raise self.error(f"{self.where}: gzip expands more than {GZIP_RATIO_LIMIT} times ({packed:,} bytes to "
                             f"{self.out:,} so far): not {self.what} (a gzip bomb?)")
        return n

    def close(self) -> None:
        self.gz.close()
        self.raw.close()
        super().close()


def open_text(path: Path, what: str, error: ErrorType = TraceFormatError) -> TextIO:
    """A regular file as UTF-8 text, gunzipped where it is gzip (bounded as _GzipGuard says)."""
    gzipped = read_head(path, 2, what, error) == b"\x1f\x8b"
    raw = open(path, "rb")  # closed with the text stream
    if gzipped:
        return io.TextIOWrapper(io.BufferedReader(_GzipGuard(raw, path, what, error)), encoding="utf-8", newline="")
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")
