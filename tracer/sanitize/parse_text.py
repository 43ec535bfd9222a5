"""Parser of compute-sanitizer's text output (stdout or --log-file): findings when no XML exists,
and always the parts only the text has (summaries, target failure, the tool's own errors)."""
from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import TextIO

from tracer.store.inputs import check_file
from tracer.sanitize.model import Parsed
from tracer.sanitize.parse_xml import Grouper, file_name
from tracer.sanitize.tools import tool_of_text

PREFIX = re.compile(r"^========= ?")
AT = re.compile(r"\bat (?P<func>[^\s+][^+]*?)\+0x[0-9a-f]+ in (?P<file>\S+):(?P<line>\d+)")  # `k(float *)+0x10`
API = re.compile(r"Program hit (?P<err>\S+) \(error \d+\) due to \".*\" on CUDA API call to (?P<api>\w+)")
HAZARD = re.compile(r"(?P<level>Error|Warning): (?:\([^)]*\) )?Potential (?P<type>\w+) hazard detected")
RACE = re.compile(r"(?P<level>Error|Warning): Race reported between (?P<a>\w+) access at (?P<rest>.*)")
RACE_AND = re.compile(r"and (?P<b>\w+) access at (?P<rest>.*?)(?: \[(?P<n>\d+) hazards\])?$")
MEMERR = re.compile(r"Invalid (?P<space>__\w+__) (?P<dir>read|write|atomic) of size \d+ bytes?")
SUMMARY = re.compile(r"ERROR SUMMARY: (?P<n>\d+) errors?")
NOT_PRINTED = re.compile(r"ERROR SUMMARY: (?P<n>\d+) errors? were not printed")
RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (?P<shown>\d+) hazards? displayed \((?P<e>\d+) errors?, (?P<w>\d+) warnings?\)")
TARGET_FAIL = ("Target application returned an error", "process didn't terminate successfully")
TOOL_FAIL = ("Device not supported", "Unable to", "unrecognised option", "unrecognized option", "No attachable process",
             "Internal Sanitizer Error", "unable to initialize", "Failed to")


LEAK = re.compile(r"^Leaked (?P<n>\d+) bytes? at 0x[0-9a-fA-F]+")
KNOWN = ("COMPUTE-SANITIZER", "LEAK SUMMARY:", "ERROR SUMMARY:", "RACECHECK SUMMARY:")
LOOKAHEAD = 4  # a memory error's detail is in its next four lines
LINE_LIMIT = 1 << 16  # characters of one line read at once


def _body(lines: Iterable[str]) -> Iterator[str]:
    """The tool's own lines, prefix removed (a header has no indent; its details are indented)."""
    return (PREFIX.sub("", ln.rstrip("\n")) for ln in lines if ln.startswith("========="))


class _Lines:
    """The body lines, one at a time, with the next few in view (bounded memory on any log)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.it = _body(lines)
        self.ahead: deque[str] = deque()

    def __iter__(self) -> Iterator[str]:
        while self.ahead or self._fill(1):
            yield self.ahead.popleft()

    def next_text(self) -> str:
        """The next line, stripped ("" at the end), left in place."""
        return self.ahead[0].strip() if self._fill(1) else ""

    def peek(self, n: int) -> list[str]:
        self._fill(n)
        return list(islice(self.ahead, n))

    def _fill(self, n: int) -> bool:
        while len(self.ahead) < n:
            nxt = next(self.it, None)
            if nxt is None:
                return False
            self.ahead.append(nxt)
        return True


def _source(text: str) -> tuple[str, str]:
    m = AT.search(text)
    return (m.group("func"), f"{file_name(m.group('file'))}:{m.group('line')}") if m else ("", "")


class _Log:
    """What a text log adds up to, line by line."""

    def __init__(self, tool: str) -> None:
        self.g = Grouper(tool)
        self.reported: int | None = None
        self.not_printed = 0
        self.target_error = False
        self.tool_errors: list[str] = []
        self.seen_tool = False  # a banner, summary or record: this is compute-sanitizer's output
        self.unparsed = 0

    def header(self, raw: str, lines: _Lines) -> None:
        """A line of the tool's without indent: a record (its details follow, indented), a summary,
        the banner, a failure, or something no pattern reads."""
        ln = raw.strip()
        if self._record(ln, lines):
            self.seen_tool = True
        elif not self._status(ln):
            self.unparsed += 1

    def _record(self, ln: str, lines: _Lines) -> bool:
        g = self.g
        if m := API.search(ln):
            g.add("api error", m.group("api"), m.group("err"), "error", ln)
        elif m := RACE.search(ln):
            func, src = _source(ln)
            while (following := lines.peek(1)) and (a := RACE_AND.search(following[0].strip())):
                g.add(f"{m.group('a').upper()}-{a.group('b').upper()} race", func, src, m.group("level").lower(), ln,
                      int(a.group("n") or 1))
                lines.ahead.popleft()
        elif m := HAZARD.search(ln):
            g.add(f"{m.group('type')} hazard", *_source(lines.next_text()), m.group("level").lower(), ln)
        elif m := MEMERR.search(ln):
            detail = " ".join([ln, *lines.peek(LOOKAHEAD)])
            err = "out of bounds" if "out of bounds" in detail else "misaligned" if "misaligned" in detail else "invalid access"
            g.add(f"{err} {m.group('dir')}", *_source(lines.next_text()), "error", ln)
        elif ln.startswith("Uninitialized"):
            g.add("uninitialized read" if "read" in ln else "uninitialized access", *_source(lines.next_text()), "error", ln)
        elif ln.startswith("Barrier error"):
            detail = ln.split("detected.")[-1].strip(" .").lower()
            g.add(f"barrier error ({detail})" if detail else "barrier error", *_source(lines.next_text()), "error", ln)
        elif LEAK.search(ln):
            g.add("leak", "", "", "error", ln)
        else:
            return False
        return True

    def _status(self, ln: str) -> bool:
        """Summaries, the banner, the target's and the tool's failures."""
        if m := NOT_PRINTED.search(ln):
            self.not_printed = int(m.group("n"))
        elif m := SUMMARY.search(ln):
            self.reported = int(m.group("n"))
        elif m := RACE_SUMMARY.search(ln):
            self.reported = int(m.group("e")) + int(m.group("w"))
        elif any(t in ln for t in TARGET_FAIL):
            self.target_error = True
        elif "Internal Sanitizer Error" in ln or (ln.startswith(("Error:", "ERROR:")) and any(t in ln for t in TOOL_FAIL)):
            self.tool_errors.append(ln)
        elif not ln.startswith(KNOWN):
            return False
        self.seen_tool = True
        return True

    def parsed(self) -> Parsed:
        g = self.g
        return Parsed(findings=g.findings(), records=g.records, incomplete=False, reported_errors=self.reported, not_printed=self.not_printed,
                      target_error=self.target_error,
                      tool_errors=tuple(self.tool_errors), recognised=self.seen_tool, unparsed=self.unparsed)


def parse_lines(lines: Iterable[str], tool: str) -> Parsed:
    log, body = _Log(tool), _Lines(lines)
    for raw in body:
        if raw[:1] not in ("", " ", "\t"):  # indented lines are a record's details, read with its header
            log.header(raw, body)
    return log.parsed()


def parse_text(path: Path, tool: str) -> Parsed:
    """Streamed: one line at a time, a few ahead, whatever the log's size; a line is read at most
    LINE_LIMIT characters at a time (the rest of a longer one is skipped), so memory is bounded."""
    check_file(path, "a compute-sanitizer text log")
    with open(path, errors="replace") as fh:
        return parse_lines(bounded_lines(fh), tool)


def bounded_lines(fh: TextIO, limit: int = LINE_LIMIT) -> Iterator[str]:
    """The file's lines, each cut at `limit` characters (compute-sanitizer's own are under 1 kB)."""
    while ln := fh.readline(limit):
        if len(ln) == limit and not ln.endswith("\n"):
            while (rest := fh.readline(limit)) and not rest.endswith("\n"):
                pass
        yield ln


def detect_tool(path: Path) -> str | None:
    """The tool named in a text log, from its summary lines or records."""
    check_file(path, "a compute-sanitizer text log")
    with open(path, errors="replace") as fh:
        head = fh.read(1 << 20)
    tool = tool_of_text(head)
    return tool.value if tool is not None else None
