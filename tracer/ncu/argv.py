"""ncu's command line, built by pure functions."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from tracer.errors import UsageError, unknown
from tracer.ncu.records import EXTRA_METRICS

DEFAULT_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "WarpStateStats", "Occupancy", "LaunchStats")
KNOWN_SECTIONS = ("ComputeWorkloadAnalysis", "InstructionStats", "LaunchStats", "MemoryWorkloadAnalysis",
                  "MemoryWorkloadAnalysis_Chart", "MemoryWorkloadAnalysis_Tables", "NumaAffinity", "Nvlink",
                  "Nvlink_Tables", "Nvlink_Topology", "Occupancy", "PmSampling", "SchedulerStats", "SourceCounters",
                  "SpeedOfLight", "SpeedOfLight_RooflineChart", "WarpStateStats", "WorkloadDistribution")
NVTX_DOMAIN = "tracer"  # the domain of tracer's own ranges (tracer/workloads/engine.py)
_NVTX_SPECIAL = re.compile(r"([/\[\]+*@\\])")


class ClockControl(str, Enum):
    NONE = "none"  # the GPU's own clocks (boost): durations as a user sees them
    BASE = "base"  # ncu locks the clocks to base: steadier counters, longer durations

    def describe(self) -> str:
        return {ClockControl.NONE: "none (clocks not locked: the GPU ran at its own boost clocks)",
                ClockControl.BASE: "base (ncu locked the GPU to its base clocks: durations are longer than unprofiled)"}[self]


class CacheControl(str, Enum):
    ALL = "all"  # caches flushed before each replay pass
    NONE = "none"


@dataclass(frozen=True, kw_only=True)
class NcuOptions:
    report_stem: Path  # ncu writes REPORT_STEM.ncu-rep
    sections: tuple[str, ...] = DEFAULT_SECTIONS
    metrics: tuple[str, ...] = EXTRA_METRICS
    kernel: str | None = None  # ncu's --kernel-name value, e.g. "regex:cast_transpose"
    launch_skip: int = 0
    launch_count: int | None = None
    nvtx_include: tuple[str, ...] = field(default_factory=tuple)
    clock_control: ClockControl = ClockControl.NONE
    cache_control: CacheControl = CacheControl.ALL


def build_argv(binary: str, opts: NcuOptions, target: list[str]) -> list[str]:
    argv = [binary, "--target-processes", "all", "--clock-control", opts.clock_control.value,
            "--cache-control", opts.cache_control.value, "--nvtx"]
    for s in opts.sections:
        argv += ["--section", s]
    if opts.metrics:
        argv += ["--metrics", ",".join(opts.metrics)]
    if opts.kernel:
        argv += ["--kernel-name", opts.kernel]
    for expr in opts.nvtx_include:
        argv += ["--nvtx-include", expr]
    if opts.launch_skip:
        argv += ["--launch-skip", str(opts.launch_skip)]
    if opts.launch_count is not None:
        argv += ["--launch-count", str(opts.launch_count)]
    return argv + ["--force-overwrite", "--export", str(opts.report_stem)] + list(target)


def export_csv_argv(binary: str, report: Path) -> list[str]:
    return [binary, "--import", str(report), "--csv", "--page", "raw"]


def kernel_regex(regex: str) -> str:
    """--kernel REGEX -> ncu's "regex:REGEX" (checked here so a typo is a one-line error, not an ncu failure)."""
    try:
        re.compile(regex)
    except re.error as exc:
        raise UsageError(f"--kernel {regex!r} is not a regular expression ({exc})") from None
    return f"regex:{regex}"


def nvtx_range_include(name: str, domain: str = NVTX_DOMAIN) -> str:
    """A push/pop range of tracer's domain, by its full name (tracer's names contain '/', which ncu
    reads as nesting unless escaped): "step0/layer0/mb0/cast_transpose" -> "tracer@step0\\/...cast_transpose/"."""
    if not name:
        raise UsageError("--range needs a range name, e.g. step0/layer0/mb0/cast_transpose")
    escaped = _NVTX_SPECIAL.sub(r"\\\1", name)
    return f"{domain}@{escaped}/"


def parse_sections(extra: list[str], source_counters: bool) -> tuple[str, ...]:
    for s in extra:
        if s not in KNOWN_SECTIONS:
            raise unknown("section", s, KNOWN_SECTIONS)
    wanted = list(DEFAULT_SECTIONS) + list(extra) + (["SourceCounters"] if source_counters else [])
    return tuple(dict.fromkeys(wanted))


def non_negative(name: str, value: int | None) -> int | None:
    if value is not None and value < 0:
        raise UsageError(f"--{name}={value} must be >= 0")
    return value


def parse_enum(kind: str, value: str, enum: type[ClockControl] | type[CacheControl]) -> ClockControl | CacheControl:
    try:
        return enum(value)
    except ValueError:
        raise unknown(kind, value, [e.value for e in enum]) from None
