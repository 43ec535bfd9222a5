"""compute-sanitizer findings and per-run verdicts."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from tracer.sanitize.tools import Tool as Tool  # re-exported: runs and findings are per tool


class SanVerdict(str, Enum):
    """Most serious first: a run's verdict is the first of these that applies."""

    TOOL_FAILED = "tool-failed"
    TIMEOUT = "timeout"
    TARGET_FAILED = "target-failed"
    ERRORS = "errors"
    INCOMPLETE = "incomplete"  # no error read, but the outputs cannot prove the run was checked to the end
    NO_ERRORS_RECORDED = "no-errors-recorded"  # XML without its text output: the target's exit is unknown
    CLEAN = "clean"


@dataclass(frozen=True, kw_only=True)
class Finding:
    """Sanitizer records grouped by (tool, kind, kernel, source)."""

    tool: str
    kind: str  # e.g. "RAW hazard", "out of bounds", "uninitialized read", "barrier error", "api error"
    kernel: str  # device function, or the API for API errors
    source: str  # "file:line", or "" when the record has none
    count: int  # records
    hazards: int  # racecheck analysis: hazards summed over the records; otherwise equal to count
    level: str  # "error" or "warning"
    message: str  # the first record's text

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        return cls(**{f.name: d[f.name] for f in fields(cls)})


@dataclass(frozen=True, kw_only=True)
class Parsed:
    """What one XML or text output said."""

    findings: tuple[Finding, ...]
    records: int
    incomplete: bool  # truncated file, or the parser stopped early
    reported_errors: int | None = None  # the tool's own summary count, when the text log has one
    not_printed: int = 0  # records the tool counted but did not print (--print-limit)
    target_error: bool = False  # "Target application returned an error" / "process didn't terminate"
    tool_errors: tuple[str, ...] = ()  # the sanitizer's own failures ("Device not supported", ...)
    recognised: bool = True  # compute-sanitizer output: the XML's root element, or a text line of the tool's own
    unparsed: int = 0  # text: records the tool printed that no pattern reads (each one may be an error)


@dataclass(frozen=True, kw_only=True)
class ToolRun:
    tool: Tool
    workload: str
    verdict: SanVerdict
    errors_found: bool
    target_failed: bool
    incomplete: bool
    target_exit: int | None
    sanitizer_exit: int | None
    findings: tuple[Finding, ...]
    suppressed: tuple[tuple[str, Finding], ...]  # (rule id, finding)
    reported_errors: int | None
    seconds: float = 0.0
    filter: str = "off"
    files: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        rules: dict[str, int] = {}
        for rule, f in self.suppressed:
            rules[rule] = rules.get(rule, 0) + f.count
        return {
            "tool": self.tool.value, "workload": self.workload, "filter": self.filter, "verdict": self.verdict.value,
            "errors_found": self.errors_found, "target_failed": self.target_failed, "incomplete": self.incomplete,
            "target_exit": self.target_exit, "sanitizer_exit": self.sanitizer_exit,
            "findings": [f.to_json() for f in self.findings],
            "suppressed": {"count": sum(f.count for _, f in self.suppressed), "rules": rules,
                           "findings": [dict(f.to_json(), rule=r) for r, f in self.suppressed]},
            "reported_errors": self.reported_errors, "seconds": round(self.seconds, 2), "files": self.files,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ToolRun:
        """A run back from its JSON (report.json); KeyError, TypeError or ValueError when it is not one."""
        suppressed = tuple((str(f["rule"]), Finding.from_json(f)) for f in d["suppressed"]["findings"])
        return cls(tool=Tool(d["tool"]), workload=str(d["workload"]), verdict=SanVerdict(d["verdict"]), errors_found=bool(d["errors_found"]),
                   target_failed=bool(d["target_failed"]), incomplete=bool(d["incomplete"]), target_exit=d["target_exit"],
                   sanitizer_exit=d["sanitizer_exit"],
                   findings=tuple(Finding.from_json(f) for f in d["findings"]), suppressed=suppressed, reported_errors=d["reported_errors"],
                   seconds=float(d.get("seconds", 0.0)), filter=str(d.get("filter", "off")), files=dict(d.get("files", {})),
                   notes=tuple(d.get("notes", ())))
