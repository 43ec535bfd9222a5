"""Atomic outputs: every file tracer writes goes to a temporary name beside its final path and is
renamed into place only when complete; on any failure the temporary file is removed and an OSError
(disk full, permission, read-only file system...) becomes one OutputError naming the path."""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracer.errors import OutputError
from tracer.store.outpath import check_kind, check_name, name_max


def output_error(path: Path, exc: OSError) -> OutputError:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OutputError(f"cannot write {path}: {reason} (nothing half-written was left)")


def temp_name(path: Path) -> Path:
    """Hidden, unique to this process, same suffix (writers that pick a format by suffix still work);
    the stem is cut where the whole name would pass the file system's NAME_MAX, never the suffix."""
    suffix = path.suffix if len(path.suffix) <= 16 else ""
    tag = f".tmp-{os.getpid()}{suffix}"
    room = name_max(path.parent) - len(os.fsencode(tag)) - 1
    stem = os.fsencode(path.stem)[:max(room, 1)].decode("utf-8", "ignore") or "t"
    return path.with_name(f".{stem}{tag}")


def missing_folder(path: Path) -> OutputError:
    return OutputError(f"cannot write {path}: folder {path.parent} does not exist (a file output's folder is not "
                       "created: make it first, or pick another path)")


@contextmanager
def atomic_output(path: Path, fsync: bool = False, make_folder: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; it becomes `path` when the block completes. make_folder=False
    for a file the user named (-o x.png): a missing folder is refused, not created (a typo in it
    would otherwise scatter outputs)."""
    check_name(path)
    check_kind(path)
    tmp = temp_name(path)
    if not make_folder and not path.parent.is_dir():
        raise missing_folder(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        if fsync:
            _fsync(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise output_error(path, exc) from exc
    except BaseException:
        _remove(tmp)
        raise


def write_text(path: Path, text: str, fsync: bool = False, make_folder: bool = True) -> Path:
    with atomic_output(path, fsync, make_folder) as tmp:
        tmp.write_text(text, encoding="utf-8", errors="backslashreplace")  # a lone surrogate from a trace name
    return path


def write_bytes(path: Path, data: bytes, fsync: bool = False) -> Path:
    with atomic_output(path, fsync) as tmp:
        tmp.write_bytes(data)
    return path


def write_json(path: Path, data: Any, indent: int | None = 1) -> Path:
    return write_text(path, json.dumps(data, indent=indent, default=str) + "\n")


def copy_file(src: Path, dst: Path) -> Path:
    with atomic_output(dst) as tmp:
        shutil.copyfile(src, tmp)
    return dst


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        pass  # a temp file that cannot be removed either: nothing more to do
