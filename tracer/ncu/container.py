"""What the bytes of a .ncu-rep say before any reader opens it: the magic, whether the file is whole,
and the ncu version and command line Nsight Compute stores in it.

NVIDIA's reader loads a truncated report without a word (it returns the results before the cut), so
the framing is checked here: after the 4-byte magic a little-endian u32 length and that many header
bytes, then length-prefixed blocks that must end exactly at the end of the file."""
from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from tracer.errors import TraceFormatError

MAGIC = b"NVR\x00"
_VERSION = re.compile(rb"Nsight Compute[^\x00-\x1f]{0,40}?[\x00-\x7f]{0,3}?(\d{4}\.\d+\.\d+(?:\.\d+)?) \(build (\d+)\)")
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")
_CLOCK = re.compile(rb"--clock-control[ =](\w+)")


@dataclass(frozen=True)
class ContainerFacts:
    ncu_version: str | None  # e.g. "2025.3.1.0 (build 36398880)"
    command_line: str | None  # the ncu command line that made the report
    clock_control: str | None  # as ncu ran: the command line's --clock-control, else ncu's default "base"


def inspect(path: Path) -> ContainerFacts:
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            if size < 8:
                raise TraceFormatError(f"{path}: {size} bytes: not an Nsight Compute report (too short)")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                _check_framing(path, data, size)
                return _facts(data)
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _check_framing(path: Path, data: mmap.mmap, size: int) -> None:
    if data[:4] != MAGIC:
        raise TraceFormatError(f"{path}: not an Nsight Compute report (the file does not start with 'NVR\\0')")
    off, blocks = 4, 0
    while off < size:
        if off + 4 > size:
            raise TraceFormatError(f"{path}: truncated: {size - off} stray bytes at {off} where a block length "
                                   f"was due (the file was cut; re-copy or re-run ncu)")
        (length,) = struct.unpack_from("<I", data, off)
        if off + 4 + length > size:
            raise TraceFormatError(f"{path}: truncated: block {blocks} at byte {off} needs {length} bytes, the file "
                                   f"ends {size - off - 4} bytes later (the file was cut; re-copy or re-run ncu)")
        off += 4 + length
        blocks += 1
    if blocks < 3:
        raise TraceFormatError(f"{path}: truncated: only {blocks} blocks, no profiling results")


def _facts(data: mmap.mmap) -> ContainerFacts:
    version = _VERSION.search(data)
    line = _command_line(data)
    clock = _CLOCK.search(line.encode()) if line else None
    clock_control = clock.group(1).decode() if clock else ("base" if line else None)
    return ContainerFacts(f"{version.group(1).decode()} (build {version.group(2).decode()})" if version else None,
                          line, clock_control)


def _command_line(data: mmap.mmap) -> str | None:
    """The printable run of bytes around the first "/ncu " (the stored argv of the profiling session)."""
    at = data.find(b"/ncu ")
    if at < 0:
        return None
    start = at
    while start > 0 and 0x20 <= data[start - 1] <= 0x7E:
        start -= 1
    run = _PRINTABLE.match(data, at)
    end = run.end() if run else at
    return data[start:end].decode("ascii").strip().rstrip('"').strip()
