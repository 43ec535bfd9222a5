"""The one guard every writer of a user-named output passes through: an output that is one of the
command's inputs (same inode, through symlinks and other spellings of the path), an existing
output that is not a regular file (a device such as /dev/null, a FIFO, a directory: the
temp-and-rename would replace it), and a name longer than the file system allows are refused
before anything is written, each in one line naming the path."""
from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path

from tracer.errors import UsageError
from tracer.store.inputs import kind_of

NAME_MAX_FALLBACK = 255
RUN_DIR_FILES = ("procs",)  # a run directory's sub-folder whose files are inputs too


def file_output(text: str) -> Path:
    """The argparse type of an output that is one file (-o, --html, --junit...): a name ending in
    '/' asks for a folder, which pathlib would quietly turn into a file of that name."""
    if text.endswith(("/", os.sep)) or text in ("", ".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder; give a file name (e.g. {text.rstrip('/') or '.'}/out.html)")
    return Path(text)


def name_max(folder: Path) -> int:
    """The longest file name (in bytes) the folder's file system takes."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return NAME_MAX_FALLBACK


def check_name(path: Path) -> None:
    longest = name_max(path.parent)
    size = len(os.fsencode(path.name))
    if size > longest:
        raise UsageError(f"output name {path.name[:40]}... is {size} bytes; this file system takes at most {longest} "
                         "(give a shorter -o)")


def check_kind(path: Path) -> None:
    """An existing output must be a regular file (it is replaced by rename, which a device must never be)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there: the write itself says what is wrong with the folder
    except OSError as exc:
        raise UsageError(f"output {path} cannot be checked ({exc.strerror or exc})") from None
    kind = kind_of(st.st_mode)
    if kind is not None:
        raise UsageError(f"output {path} is {kind}; tracer writes only regular files (give a file name)")


def _input_files(inputs: Iterable[Path]) -> Iterable[Path]:
    """The inputs, with the files directly inside input directories (and their procs/) that are read."""
    for p in inputs:
        yield p
        if p.is_dir():
            for sub in (p, *(p / d for d in RUN_DIR_FILES)):
                if sub.is_dir():
                    yield from (f for f in sub.iterdir() if f.is_file())


def check_not_input(path: Path, inputs: Iterable[Path]) -> None:
    if not path.exists():
        return
    for src in _input_files(inputs):
        try:
            same = os.path.samefile(path, src)
        except OSError:
            continue
        if same:
            raise UsageError(f"output {path} is the input {src}; writing it would destroy the input (give another -o)")


def guard_output(path: Path, inputs: Iterable[Path] = ()) -> Path:
    """Refuse an output that would destroy an input, replace a non-file, or cannot be named; return it."""
    check_name(path)
    check_kind(path)
    check_not_input(path, inputs)
    return path
