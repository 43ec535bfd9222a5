"""compute-sanitizer's command line, built by a pure function."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tracer.sanitize.tools import Tool, parse_tools

ERROR_EXITCODE = 86  # what compute-sanitizer exits with when it found errors


@dataclass(frozen=True, kw_only=True)
class SanitizeOptions:
    tool: Tool
    xml_path: Path
    print_limit: int = 10000
    leak_check: bool = False
    racecheck_report: str = "analysis"  # analysis | hazard | all
    racecheck_detect_level: str = "warn"  # info | warn | error
    target_processes: str = "all"
    include_kernels: tuple[str, ...] = field(default_factory=tuple)  # compute-sanitizer filter strings
    exclude_kernels: tuple[str, ...] = field(default_factory=tuple)
    error_exitcode: int = ERROR_EXITCODE
    extra: tuple[str, ...] = field(default_factory=tuple)


__all__ = ["ERROR_EXITCODE", "SanitizeOptions", "Tool", "build_argv", "parse_tools"]


def build_argv(binary: str, opts: SanitizeOptions, target: list[str]) -> list[str]:
    argv = [binary, "--tool", opts.tool.value, "--xml", "--save", str(opts.xml_path),
            "--error-exitcode", str(opts.error_exitcode), "--print-limit", str(opts.print_limit),
            "--target-processes", opts.target_processes]
    argv += opts.tool.spec.flags(opts)
    for f in opts.include_kernels:
        argv += ["--kernel-name", f]
    for f in opts.exclude_kernels:
        argv += ["--kernel-name-exclude", f]
    return argv + list(opts.extra) + list(target)
