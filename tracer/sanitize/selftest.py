"""The sanitizer self-test: every planted workload and the clean one under every tool. Each tool must
catch the defect planted for it and the clean workload must be clean under all four."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tracer.sanitize.model import SanVerdict, Tool, ToolRun

if TYPE_CHECKING:
    from tracer.sanitize.plan import Job

CLEAN_WORKLOAD = "cast_transpose_dgrad"
PLANTED = {t.spec.planted: t for t in Tool}
WORKLOADS = (CLEAN_WORKLOAD, *PLANTED)
SHAPE = "256x256x256"


def selftest_failures(runs: Sequence[ToolRun]) -> list[str]:
    """The expectations a set of runs does not meet (empty: the self-test passed)."""
    out = []
    for r in runs:
        if r.workload == CLEAN_WORKLOAD and r.verdict is not SanVerdict.CLEAN:
            out.append(f"clean workload is {r.verdict.value} under {r.tool.value}")
        if PLANTED.get(r.workload) is r.tool and not r.errors_found:
            out.append(f"{r.tool.value} missed the defect planted in {r.workload} ({r.verdict.value})")
    return out


def _cell(run: ToolRun | None, expected: bool) -> str:
    n = sum(f.count for f in run.findings) if run else 0
    text = "-" if run is None else run.verdict.value + (f" ({n})" if n else "")
    return text + ("*" if expected else " ")


def format_matrix(runs: Sequence[ToolRun], workloads: Sequence[str]) -> str:
    """Tool x workload verdicts; * marks the tool that must catch the planted defect."""
    cell = {(r.workload, r.tool): r for r in runs}
    lines = [f"{'workload':<22}" + "".join(f"{t.value:>20}" for t in Tool)]
    for w in workloads:
        lines.append(f"{w:<22}" + "".join(f"{_cell(cell.get((w, t)), PLANTED.get(w) is t):>20}" for t in Tool))
    lines.append("(* the tool that must catch the planted defect)")
    return "\n".join(lines)


def selftest_jobs(filter_on: bool) -> list[Job]:
    """Every workload of the self-test under every tool, with the profile's kernel filter when asked."""
    from tracer.sanitize.plan import FilterRun, Job, workload_command  # runs tools: imported only here
    from tracer.sanitize.runner import kernel_filter

    jobs: list[Job] = []
    for w in WORKLOADS:
        name, argv, project = workload_command(w, 1, SHAPE)
        include = tuple(kernel_filter(k) for k in project) if filter_on else ()
        jobs += [Job(name, argv, FilterRun("on" if include else "off", include, ()), tool) for tool in Tool]
    return jobs


def selftest_report(runs: Sequence[ToolRun]) -> tuple[str, list[str]]:
    """(the matrix and verdict to print, the expectations not met)."""
    failures = selftest_failures(runs)
    last = [f"FAIL: {f}" for f in failures] or ["selftest: every planted defect caught; the clean workload is clean "
                                                "under all four tools"]
    return "\n".join([format_matrix(runs, WORKLOADS), *last]), failures
