"""Run a target under ncu (tracer.proc: argv list, process-group timeout, output in log files), turn
ncu's known failures into one-line errors, and export the report's raw CSV beside it."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from tracer import proc
from tracer.errors import TimedOut, ToolMissingError, UsageError
from tracer.ncu.argv import NcuOptions, build_argv, export_csv_argv
from tracer.ncu.reader import csv_beside

PROFILED = re.compile(r'==PROF== Profiling "([^"]+)"')
LISTED = re.compile(r"\s*\d+\.\s+(\S.*?)\s*")  # "1. cast_transpose" under ncu's "Available Kernels:"
LIST_LAUNCHES = 50  # launches looked at when listing what ran after a filter matched nothing


class Failure(str, Enum):
    COUNTER_PERMISSION = "counter-permission"
    PROFILER_UNAVAILABLE = "profiler-unavailable"
    NO_KERNELS = "no-kernels"


CAUSES = {
    Failure.COUNTER_PERMISSION: "ncu cannot read the GPU's performance counters: the driver lets only admin users "
                                "profile (ERR_NVGPUCTRPERM); run as root, or load the nvidia module with "
                                "NVreg_RestrictProfilingToAdminUsers=0",
    Failure.PROFILER_UNAVAILABLE: "ncu could not start its profiler (\"Failed to initialize the profiler: "
                                  "LibraryNotLoaded\"): this GPU exposes no performance counters here, as on a "
                                  "virtualised GPU or in a gVisor sandbox; run on a machine with direct GPU access",
}


def classify(text: str) -> Failure | None:
    if "ERR_NVGPUCTRPERM" in text:
        return Failure.COUNTER_PERMISSION
    if "LibraryNotLoaded" in text or "Failed to initialize the profiler" in text:
        return Failure.PROFILER_UNAVAILABLE
    if "No kernels were profiled" in text:
        return Failure.NO_KERNELS
    return None


@dataclass(frozen=True)
class Target:
    label: str  # file stem of its report, and its name in comparisons
    argv: tuple[str, ...]
    variant: str | None = None


@dataclass(frozen=True, kw_only=True)
class TargetRun:
    label: str
    variant: str | None
    argv: tuple[str, ...]
    ncu_argv: tuple[str, ...]
    exit: int | None  # ncu's exit code, which is the target's when ncu itself did not fail
    seconds: float
    report: str  # file names inside the run directory
    csv: str | None
    log: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__, argv=list(self.argv), ncu_argv=list(self.ncu_argv))


def profile_target(binary: str, opts: NcuOptions, target: Target, out: Path, logs: Path, timeout: float) -> TargetRun:
    opts = replace(opts, report_stem=out / target.label)
    argv = build_argv(binary, opts, list(target.argv))
    log = logs / f"{target.label}.ncu.log"
    res = proc.run(argv, timeout=timeout, stdout_path=log, stderr_path=log.with_suffix(".stderr"))
    report = out / f"{target.label}.ncu-rep"
    if res.timed_out:
        raise TimedOut(f"ncu on {target.label} was killed at --timeout {timeout:g} s (the whole process group)")
    check_outcome(res.stdout() + "\n" + res.stderr(), res.returncode, report, opts,
                  lambda: kernels_that_ran(binary, target, opts, logs, timeout))
    csv = export_csv(binary, report, logs, timeout)
    return TargetRun(label=target.label, variant=target.variant, argv=target.argv, ncu_argv=tuple(argv), exit=res.returncode,
                     seconds=round(res.seconds, 3),
                     report=report.name, csv=csv.name if csv else None, log=log.name)


def check_outcome(text: str, code: int | None, report: Path, opts: NcuOptions, ran: Any) -> None:
    """Raise the one-line error for a failed ncu run; return when a report was written."""
    cause = classify(text)
    if cause in CAUSES:
        raise ToolMissingError(CAUSES[cause])
    if cause is Failure.NO_KERNELS:
        names = available_kernels(text)
        names = ran() if names is None else names
        seen = f"the kernels that ran: {', '.join(names)}" if names else "no kernel launch was seen at all"
        if names is None:
            seen = "the kernels that ran could not be listed"
        raise UsageError(f"no kernel launch matched {describe_filters(opts)} (exit {code}); {seen}")
    if not report.is_file():
        errors = [ln.strip() for ln in text.splitlines() if ln.startswith("==ERROR==")]
        tail = errors[-1] if errors else (text.strip().splitlines() or ["(no output)"])[-1]
        raise ToolMissingError(f"ncu wrote no report (exit {code}): {tail[:300]}")


def available_kernels(text: str) -> list[str] | None:
    """The full kernel names ncu (2025.3 and later) lists after "No kernels were profiled."; None when
    it did not list them (then a second ncu run finds them)."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip() == "Available Kernels:"), None)
    if at is None:
        return None
    names = []
    for line in lines[at + 1:]:
        m = LISTED.fullmatch(line)
        if not m:
            break
        names.append(m.group(1))
    return names or None


def describe_filters(opts: NcuOptions) -> str:
    parts = [f"--kernel-name {opts.kernel}" if opts.kernel else "any kernel name"]
    parts += [f"--nvtx-include {e}" for e in opts.nvtx_include]
    if opts.launch_skip:
        parts.append(f"after skipping {opts.launch_skip} launches")
    return ", ".join(parts)


def kernels_that_ran(binary: str, target: Target, opts: NcuOptions, logs: Path, timeout: float) -> list[str] | None:
    """Names of the first launches, from a second, unfiltered ncu run that collects one metric (ncu
    shortens long names there: "distribution_elementwise_grid...")."""
    quick = replace(opts, sections=(), metrics=("gpu__time_duration.sum",), kernel=None, nvtx_include=(),
                    launch_skip=0, launch_count=LIST_LAUNCHES, report_stem=logs / f"{target.label}.list")
    log = logs / f"{target.label}.list.log"
    res = proc.run(build_argv(binary, quick, list(target.argv)), timeout=timeout, stdout_path=log,
                   stderr_path=log.with_suffix(".stderr"))
    if res.timed_out:
        return None
    names = PROFILED.findall(res.stdout() + res.stderr())
    Path(f"{quick.report_stem}.ncu-rep").unlink(missing_ok=True)
    return list(dict.fromkeys(names))


def export_csv(binary: str, report: Path, logs: Path, timeout: float) -> Path | None:
    """REPORT.raw.csv for readers without ncu-report; None (and its log kept) when the export failed."""
    final = csv_beside(report)
    tmp = final.with_name(f".{final.name}.tmp")
    res = proc.run(export_csv_argv(binary, report), timeout=timeout, stdout_path=tmp,
                   stderr_path=logs / f"{final.name}.stderr")
    if res.returncode != 0 or res.timed_out or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        return None
    tmp.replace(final)
    return final
