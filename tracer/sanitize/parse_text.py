"""Parser of compute-sanitizer's text output (stdout or --log-file): findings when no XML exists,
and always the parts only the text has (summaries, target failure, the tool's own errors)."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from tracer.errors import TraceFormatError
from tracer.sanitize.model import Parsed
from tracer.sanitize.parse_xml import Grouper

PREFIX = re.compile(r"^========= ?")
AT = re.compile(r"at (?P<func>[^\s+]+)\+0x[0-9a-f]+ in (?P<file>\S+):(?P<line>\d+)")
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


def _body(lines: Iterable[str]) -> list[str]:
    return [PREFIX.sub("", ln.rstrip("\n")) for ln in lines if ln.startswith("=========")]


def _source(text: str) -> tuple[str, str]:
    m = AT.search(text)
    return (m.group("func"), f"{Path(m.group('file')).name}:{m.group('line')}") if m else ("", "")


def parse_lines(lines: list[str], tool: str) -> Parsed:
    g = Grouper(tool)
    body = _body(lines)
    reported, not_printed, target_error, tool_errors = None, 0, False, []
    i = 0
    while i < len(body):
        ln = body[i].strip()
        nxt = body[i + 1].strip() if i + 1 < len(body) else ""
        if m := API.search(ln):
            g.add("api error", m.group("api"), m.group("err"), "error", ln)
        elif m := RACE.search(ln):
            func, src = _source(ln)
            j = i + 1
            while j < len(body) and (a := RACE_AND.search(body[j].strip())):
                g.add(f"{m.group('a').upper()}-{a.group('b').upper()} race", func, src, m.group("level").lower(), ln,
                      int(a.group("n") or 1))
                j += 1
            i = j - 1
        elif m := HAZARD.search(ln):
            func, src = _source(nxt)
            g.add(f"{m.group('type')} hazard", func, src, m.group("level").lower(), ln)
        elif m := MEMERR.search(ln):
            func, src = _source(nxt)
            detail = " ".join(body[i:i + 5])
            err = "out of bounds" if "out of bounds" in detail else "misaligned" if "misaligned" in detail else "invalid access"
            g.add(f"{err} {m.group('dir')}", func, src, "error", ln)
        elif ln.startswith("Uninitialized __global__ memory read") or ln.startswith("Uninitialized"):
            func, src = _source(nxt)
            g.add("uninitialized read" if "read" in ln else "uninitialized access", func, src, "error", ln)
        elif ln.startswith("Barrier error"):
            func, src = _source(nxt)
            detail = ln.split("detected.")[-1].strip(" .").lower()
            g.add(f"barrier error ({detail})" if detail else "barrier error", func, src, "error", ln)
        elif m := NOT_PRINTED.search(ln):
            not_printed = int(m.group("n"))
        elif m := SUMMARY.search(ln):
            reported = int(m.group("n"))
        elif m := RACE_SUMMARY.search(ln):
            reported = int(m.group("e")) + int(m.group("w"))
        elif any(t in ln for t in TARGET_FAIL):
            target_error = True
        elif "Internal Sanitizer Error" in ln or (ln.startswith(("Error:", "ERROR:")) and any(t in ln for t in TOOL_FAIL)):
            tool_errors.append(ln)
        i += 1
    return Parsed(g.findings(), g.records, False, reported, not_printed, target_error, tuple(tool_errors))


def parse_text(path: Path, tool: str) -> Parsed:
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    with open(path, errors="replace") as fh:
        return parse_lines(fh.readlines(), tool)


def detect_tool(path: Path) -> str | None:
    """The tool named in a text log, from its summary lines or records."""
    with open(path, errors="replace") as fh:
        head = fh.read(1 << 20)
    if "RACECHECK SUMMARY" in head or "hazard detected" in head or "Race reported" in head:
        return "racecheck"
    if "Uninitialized __global__" in head:
        return "initcheck"
    if "Barrier error" in head:
        return "synccheck"
    return None
