"""The compute-sanitizer tools, each described once: its `--tool` value, what it checks (the report's
title), its own command-line flags, how its outputs name it (XML record kinds, text-log signs),
the self-test workload planted for it and the note its findings need under a kernel filter. argv,
plan, the parsers, the reports, the self-test, the verdict matrix and doctor read this table;
adding a tool is one member of `Tool` (docs/design/architecture.md)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from tracer.errors import unknown

RACECHECK_REPORTS = ("analysis", "hazard", "all")
RACECHECK_LEVELS = ("info", "warn", "error")


class ToolSettings(Protocol):
    """The run settings a tool's own flags come from (argv.SanitizeOptions)."""

    @property
    def leak_check(self) -> bool: ...

    @property
    def racecheck_report(self) -> str: ...

    @property
    def racecheck_detect_level(self) -> str: ...


def _no_flags(_: ToolSettings) -> list[str]:
    return []


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    title: str  # what it checks, in words (reports, help, doctor)
    xml_kinds: tuple[str, ...]  # the `kind` of its <record> elements in --xml output
    text_signs: tuple[str, ...]  # strings only its text log holds (a log without them reads as the fallback tool)
    planted: str  # the self-test workload whose defect it must catch
    flags: Callable[[ToolSettings], list[str]] = _no_flags  # its own compute-sanitizer flags
    filter_note: str = ""  # said when it ran with a kernel filter and found something


class Tool(str, Enum):
    """A compute-sanitizer tool: the value is `--tool`'s, `spec` the rest of what tracer knows."""

    spec: ToolSpec

    def __new__(cls, value: str, spec: ToolSpec | None = None) -> Tool:  # Tool("memcheck") looks a member up, never here
        obj = str.__new__(cls, value)
        obj._value_ = value
        if spec is not None:
            obj.spec = spec
        return obj

    MEMCHECK = ("memcheck", ToolSpec(
        title="memory access errors: out of bounds, misaligned, failed API calls, leaks (--leak-check)",
        xml_kinds=("Precise", "Imprecise", "Leak"), text_signs=(), planted="planted_oob",
        flags=lambda s: ["--leak-check", "full"] if s.leak_check else []))
    RACECHECK = ("racecheck", ToolSpec(
        title="shared-memory data races between threads of a block",
        xml_kinds=("Hazard", "Analysis"), text_signs=("RACECHECK SUMMARY", "hazard detected", "Race reported"),
        planted="planted_race",
        flags=lambda s: ["--racecheck-report", s.racecheck_report, "--racecheck-detect-level", s.racecheck_detect_level]))
    INITCHECK = ("initcheck", ToolSpec(
        title="reads of uninitialized global memory",
        xml_kinds=("Initcheck",), text_signs=("Uninitialized __global__",), planted="planted_uninit",
        filter_note="initcheck ran with a kernel filter: writes by unchecked kernels are invisible to it, so "
                    "uninitialized-read findings on memory they wrote are false positives; compare --filter off"))
    SYNCCHECK = ("synccheck", ToolSpec(
        title="invalid uses of synchronization primitives (barriers)",
        xml_kinds=("Synccheck",), text_signs=("Barrier error",), planted="planted_barrier"))


FALLBACK = Tool.MEMCHECK  # the tool of an XML record kind or a text log that names none
TOOL_OF_KIND = {kind: t for t in Tool for kind in t.spec.xml_kinds}


def tool_names() -> list[str]:
    return [t.value for t in Tool]


def parse_tools(name: str) -> tuple[Tool, ...]:
    """`--tool NAME`: one tool, or every one for `all`."""
    if name == "all":
        return tuple(Tool)
    try:
        return (Tool(name),)
    except ValueError:
        raise unknown("tool", name, [*tool_names(), "all"]) from None


def tool_of_text(head: str) -> Tool | None:
    """The tool whose text-log signs appear in `head` (the first of them, in table order)."""
    return next((t for t in Tool if any(sign in head for sign in t.spec.text_signs)), None)


def tool_in_name(name: str) -> Tool | None:
    """The tool a file name mentions (memcheck-w-off.xml), if any."""
    return next((t for t in Tool if t.value in name), None)
