"""What `tracer sanitize` runs: targets (a workload or a command) x kernel-filter runs x tools as
jobs, run up to N at once; and the check that a kernel filter matches a kernel the target launches
(a filter that matches nothing would report clean without checking anything)."""
from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracer.errors import ToolMissingError, UsageError, unknown
from tracer.proc import check_timeout, raise_if_timed_out
from tracer.sanitize.argv import SanitizeOptions
from tracer.sanitize.model import Tool, ToolRun
from tracer.sanitize.runner import filter_matches, find_sanitizer, kernel_filter, run_tool
from tracer.sanitize.suppress import Rule
from tracer.sanitize.tools import RACECHECK_LEVELS, RACECHECK_REPORTS

FILTER_MODES = ("on", "off", "both")


@dataclass(frozen=True)
class FilterRun:
    label: str  # "on": with the kernel filter; "off": every kernel
    include: tuple[str, ...]  # compute-sanitizer filter strings (kns=...)
    exclude: tuple[str, ...]


@dataclass(frozen=True)
class Target:
    name: str
    argv: tuple[str, ...]
    filters: tuple[FilterRun, ...]

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "argv": list(self.argv),
                "filters": [[f.label, list(f.include), list(f.exclude)] for f in self.filters]}


@dataclass(frozen=True)
class Job:
    target: str
    argv: tuple[str, ...]
    filter: FilterRun
    tool: Tool


MAX_JOBS = 64  # sanitizer runs at once on one machine
MAX_PRINT_LIMIT = 10_000_000  # records compute-sanitizer prints per run


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How each tool runs (the same for every job)."""

    print_limit: int = 1000
    leak_check: bool = False
    racecheck_report: str = "analysis"
    racecheck_detect_level: str = "warn"
    timeout: float = 1800.0
    jobs: int = 4

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", check_timeout(self.timeout))
        if self.racecheck_report not in RACECHECK_REPORTS:
            raise unknown("--racecheck-report", self.racecheck_report, RACECHECK_REPORTS)
        if self.racecheck_detect_level not in RACECHECK_LEVELS:
            raise unknown("--racecheck-detect-level", self.racecheck_detect_level, RACECHECK_LEVELS)
        if not 1 <= self.jobs <= MAX_JOBS:
            raise UsageError(f"--jobs {self.jobs} is out of range (allowed: 1 to {MAX_JOBS})")
        if not 0 <= self.print_limit <= MAX_PRINT_LIMIT:
            raise UsageError(f"--print-limit {self.print_limit} is out of range (allowed: 0 to {MAX_PRINT_LIMIT:,})")


def workload_command(name: str, steps: int | None, shape: str | None,
                     variant: str | None = None) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(label, argv, the profile's kernel filter) of a built-in workload or profile under `tracer run`."""
    from tracer.kernel.spec import parse_variant
    from tracer.workloads.spec import resolve_workload

    spec = resolve_workload(name, shape=shape, steps=steps)  # bad values refused here, not in the child
    cmd = [sys.executable, "-m", "tracer", "run", name, "--steps", str(steps or 1), "--no-fail-on-check"]
    if shape is not None:
        cmd += ["--shape", shape]
    label = spec.name
    if variant:
        cmd += ["--variant", parse_variant(variant).value]
        label = f"{spec.name}.{variant}"
    return label, tuple(cmd), spec.kernel_filter


def filter_runs(name: str, include: tuple[str, ...], exclude: tuple[str, ...], mode: str) -> tuple[FilterRun, ...]:
    """`--filter on` without a filter runs (and is labelled) unfiltered; `--filter both` without one
    is refused: its two runs would be the same run."""
    if mode not in FILTER_MODES:
        raise unknown("--filter mode", mode, FILTER_MODES)
    if mode == "both" and not include:
        raise UsageError(f"--filter both compares a filtered and an unfiltered run, but {name} has no kernel filter "
                         "(none in its profile, no --only-kernel); use --filter off, or give --only-kernel NAME")
    on, off = FilterRun("on" if include else "off", include, exclude), FilterRun("off", (), exclude)
    return {"on": (on,), "off": (off,), "both": (on, off)}[mode]


def plan(workload: str | None, command: Sequence[str], *, steps: int | None = None, shape: str | None = None,
         variants: Sequence[str] = (), only: Sequence[str] = (), exclude: Sequence[str] = (),
         mode: str | None = None, verify_timeout: float | None = None) -> list[Target]:
    """One target per variant of a workload, or the user's command; with verify_timeout, the
    kernel filters are checked against a CUPTI run of the (first) target first."""
    if command and workload:
        raise UsageError("give either WORKLOAD or a command after --, not both")
    if command:
        targets: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [(Path(command[0]).name, tuple(command), ())]
    elif workload:
        chosen: Sequence[str | None] = variants or [None]
        targets = [workload_command(workload, steps, shape, v) for v in chosen]
    else:
        raise UsageError("give one WORKLOAD (or a command after --; or `sanitize import FILE`, `sanitize selftest`)")
    out = []
    for name, argv, project in targets:
        include = tuple(kernel_filter(k) for k in (only or project))
        runs = filter_runs(name, include, tuple(kernel_filter(k) for k in exclude), mode or ("on" if only else "off"))
        out.append(Target(name, argv, runs))
    if verify_timeout is not None:
        verify_filters(out[0], check_timeout(verify_timeout))
    return out


def jobs_for(targets: Sequence[Target], tools: Sequence[Tool]) -> list[Job]:
    return [Job(t.name, t.argv, f, tool) for t in targets for f in t.filters for tool in tools]


def execute(jobs: Sequence[Job], out: Path, rules: tuple[Rule, ...], settings: Settings,
            on_done: Callable[[Job, ToolRun], None] = lambda job, run: None) -> list[ToolRun]:
    """Run the jobs, up to settings.jobs at once; results in job order."""
    from concurrent.futures import ThreadPoolExecutor

    binary = find_sanitizer()

    def one(job: Job) -> ToolRun:
        opts = SanitizeOptions(tool=job.tool, xml_path=out / f"{job.tool.value}-{job.target}-{job.filter.label}.xml",
                               print_limit=settings.print_limit, leak_check=settings.leak_check,
                               racecheck_report=settings.racecheck_report,
                               racecheck_detect_level=settings.racecheck_detect_level,
                               include_kernels=job.filter.include, exclude_kernels=job.filter.exclude)
        run = run_tool(binary, opts, list(job.argv), out, job.target, rules, settings.timeout, job.filter.label)
        on_done(job, run)
        return run

    with ThreadPoolExecutor(settings.jobs) as pool:
        return list(pool.map(one, jobs))


def launched_kernels(command: Sequence[str], timeout: float) -> set[str]:
    """Mangled names of the kernels the target launches, from a CUPTI run of it (no sanitizer)."""
    from tracer.capture.launcher import capture
    from tracer.store.sqlite_open import open_sqlite

    with tempfile.TemporaryDirectory(prefix="tracer-kernels-") as tmp:
        out = Path(tmp) / "k.sqlite"
        raise_if_timed_out(capture(list(command), out, Path(tmp), timeout), "the CUPTI run listing the target's kernels")
        if not out.is_file():
            raise UsageError("could not list the target's kernels to verify the filter (its CUPTI run wrote no trace)")
        con = open_sqlite(out)
        try:
            return {r[0] for r in con.execute("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                              "JOIN StringIds s ON s.id = k.mangledName")}
        finally:
            con.close()


def verify_filters(target: Target, timeout: float) -> None:
    """Refuse a kernel filter that matches none of the kernels the target launches."""
    filters = sorted({f for run in target.filters for f in run.include + run.exclude})
    if not filters:
        return
    from tracer.gpu import require_gpu_for_capture

    require_gpu_for_capture()
    try:
        names = launched_kernels(target.argv, timeout)
    except ToolMissingError as exc:
        raise ToolMissingError(f"cannot verify the kernel filter ({exc}); pass --no-verify-filter to run unverified") from exc
    for flt in filters:
        if not filter_matches(flt, names):
            sample = ", ".join(sorted(names)[:5])
            raise UsageError(f"kernel filter {flt!r} matched none of the {len(names)} kernels the target launched "
                             f"(e.g. {sample}); a run with it would report clean without checking anything")


def run_into(output: Path | None, name: str, jobs: Sequence[Job], rules: tuple[Rule, ...], settings: Settings,
             command: dict[str, object], on_done: Callable[[Job, ToolRun], None] = lambda job, run: None,
             ) -> tuple[list[ToolRun], Path]:
    """(runs, run directory): the jobs' outputs, command.json and report.json in output (default
    runs/sanitize-NAME-TIMESTAMP), written under a temporary name and renamed when complete."""
    from tracer.gpu import require_gpu_for_capture
    from tracer.sanitize.report import to_json
    from tracer.schemas import with_header
    from tracer.store.atomic import write_text
    from tracer.store.rundir import default_run_dir, staged, write_json

    require_gpu_for_capture()  # "no GPU" before anything about compute-sanitizer
    final = output or default_run_dir(f"sanitize-{name}")
    with staged(final) as tmp:
        runs = execute(jobs, tmp, rules, settings, on_done)
        write_json(tmp / "command.json", with_header("command", command))
        write_text(tmp / "report.json", to_json(runs))
    return runs, final


def load_suppressions(extra: Sequence[Path], defaults: bool = True) -> tuple[Rule, ...]:
    """The shipped suppressions (unless defaults is False), then the extra files'."""
    from tracer.sanitize.suppress import DEFAULT_FILE, load_rules

    return tuple(r for f in ([DEFAULT_FILE] if defaults else []) + list(extra) for r in load_rules(f))


def progress_line(job: Job, run: ToolRun) -> str:
    return f"  {job.tool.value:<10} {job.target} filter={job.filter.label}: {run.verdict.value} ({run.seconds:.0f} s)"
