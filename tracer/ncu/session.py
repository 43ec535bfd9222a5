"""What `tracer profile` runs and leaves behind: the targets (a workload's variants, or the user's
command), ncu on each into a run directory (reports, their raw CSV exports, logs, command.json,
environment.json, profile.json; written under a temporary name and renamed when complete), imports
of reports made elsewhere, and the SASS summaries `profile compare --sass` prints beside the counters."""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tracer.errors import TracerError, UsageError
from tracer.ncu.argv import (CacheControl, ClockControl, NcuOptions, kernel_regex, non_negative, nvtx_range_include,
                             parse_enum, parse_sections)
from tracer.ncu.runner import Target, TargetRun
from tracer.ncu.profile_json import ProfiledTarget, ProfileRun


@dataclass(frozen=True)
class Plan:
    name: str  # of the run directory
    targets: tuple[Target, ...]
    kernel: str | None  # the kernel regex when --kernel is not given (workloads: their cast-transpose kernel)
    meta: dict[str, Any] = field(default_factory=dict)  # workload, shape, config, in_dtype, cast_shape when known


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What ncu collects and on which launches (the same for every target)."""

    kernel: str | None = None
    ranges: tuple[str, ...] = ()  # tracer's NVTX range names
    nvtx_include: tuple[str, ...] = ()  # ncu --nvtx-include expressions, verbatim
    launch_skip: int = 0
    launch_count: int | None = None
    section: tuple[str, ...] = ()
    source_counters: bool = False
    clock_control: str = "none"
    cache_control: str = "all"
    timeout: float = 1800.0

    def ncu_options(self, default_kernel: str | None) -> NcuOptions:
        non_negative("launch-skip", self.launch_skip)
        _positive("launch-count", self.launch_count)
        regex = self.kernel or default_kernel
        return NcuOptions(report_stem=Path("report"), sections=parse_sections(list(self.section), self.source_counters),
                          kernel=kernel_regex(regex) if regex else None, launch_skip=self.launch_skip,
                          launch_count=self.launch_count,
                          nvtx_include=tuple(nvtx_range_include(r) for r in self.ranges) + tuple(self.nvtx_include),
                          clock_control=parse_enum("clock control", self.clock_control, ClockControl),  # type: ignore[arg-type]  # parse_enum returns the enum it is given, the stubs only know the union
                          cache_control=parse_enum("cache control", self.cache_control, CacheControl))  # type: ignore[arg-type]  # parse_enum returns the enum it is given, the stubs only know the union


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"--{name}={value} must be >= 1")


def plan(workload: str | None, command: Sequence[str], *, variants: Sequence[str] = (), config: str | None = None,
         shape: str | None = None, steps: int = 1) -> Plan:
    """A workload's variants ('all': every fence variant), one target each, or the user's command."""
    if command and workload:
        raise UsageError("give either WORKLOAD or a command after --, not both")
    if command:
        return command_plan(command)
    if not workload:
        raise UsageError("give one WORKLOAD (or a command after --, or `compare RUN`, or `import FILE`)")
    return workload_plan(workload, variants, config, shape, steps)


def workload_plan(workload: str, variants: Sequence[str], config: str | None, shape: str | None, steps: int) -> Plan:
    from tracer.kernel.spec import FENCE_VARIANTS
    from tracer.workloads.spec import resolve_workload

    _positive("steps", steps)
    names = [v.value for v in FENCE_VARIANTS] if "all" in variants else list(dict.fromkeys(variants))
    targets, spec = [], None
    chosen: list[str | None] = [*names] or [None]
    for v in chosen:
        spec = resolve_workload(workload, variant=v, config=config, shape=shape, steps=steps)
        cmd = [sys.executable, "-m", "tracer", "run", workload, "--no-fail-on-check", "--steps", str(steps)]
        for flag, value in (("variant", v), ("config", config), ("shape", shape)):
            cmd += [f"--{flag}", value] if value else []
        targets.append(Target(v or spec.variant.value, tuple(cmd), v or spec.variant.value))
    assert spec is not None
    kernel = "^(" + "|".join(spec.kernel_filter or ("cast_transpose",)) + ")$"
    meta = {"workload": spec.name, "shape": shape, "config": str(spec.config) if spec.config else "auto",
            "in_dtype": spec.in_dtype.value, "cast_shape": [spec.tokens, spec.out_dim]}
    return Plan(spec.name, tuple(targets), kernel, meta)


def command_plan(command: Sequence[str]) -> Plan:
    script = next((a for a in command if a.endswith(".py")), command[0])
    label = Path(script).name.removesuffix(".py") or "command"
    return Plan(label, (Target(label, tuple(command)),), None, {"command": list(command)})


def progress_line(r: TargetRun) -> str:
    warn = f"; warning: it exited {r.exit} under ncu, see logs/{r.log}" if r.exit not in (0, None) else ""
    return f"  ncu {r.label}: exit {r.exit} ({r.seconds:.0f} s){warn}"


def record(p: Plan, settings: Settings, output: Path | None,
           on_done: Callable[[TargetRun], None] = lambda run: None) -> ProfileRun:
    """ncu on every target into `output` (default runs/profile-NAME-TIMESTAMP); a report that cannot
    be read is an error naming the run directory, which is kept (`tracer profile import` reads it)."""
    from tracer.ncu.runner import profile_target
    from tracer.ncu.tool import find_ncu
    from tracer.schemas import with_header
    from tracer.store.rundir import default_run_dir, environment, staged, write_json

    opts = settings.ncu_options(p.kernel)
    binary = find_ncu()
    output = output or default_run_dir(f"profile-{p.name}")
    with staged(output) as tmp:
        (tmp / "logs").mkdir()
        runs = []
        for t in p.targets:
            runs.append(profile_target(binary, opts, t, tmp, tmp / "logs", settings.timeout))
            on_done(runs[-1])
        write_json(tmp / "command.json", with_header("command", {"ncu": binary, "clock_control": opts.clock_control.value,
                                          "cache_control": opts.cache_control.value, "sections": list(opts.sections),
                                          "kernel": opts.kernel, "nvtx_include": list(opts.nvtx_include),
                                          "targets": [r.to_json() for r in runs]}))
        write_json(tmp / "environment.json", with_header("environment", environment()))
        profiled, error = read_targets(tmp, runs)
        run = ProfileRun(str(output), opts.clock_control.value, tuple(profiled), p.meta)
        if error is None:
            write_json(tmp / "profile.json", run.to_json())
    if error is not None:
        raise type(error)(f"{error} (the reports are in {output}; read them with `tracer profile import`)")
    return run


def read_targets(folder: Path, runs: Sequence[TargetRun]) -> tuple[list[ProfiledTarget], TracerError | None]:
    from tracer.ncu.reader import read_report

    out: list[ProfiledTarget] = []
    for r in runs:
        try:
            report = read_report(folder / r.report)
        except TracerError as exc:
            return out, exc
        files = tuple(f for f in (r.report, r.csv) if f)
        out.append(ProfiledTarget(label=r.label, variant=r.variant, report=replace(report, path=r.report), exit=r.exit, files=files))
    return out, None


def import_report(path: Path, label: str | None, output: Path | None) -> ProfileRun:
    """A run directory (default runs/profile-LABEL-TIMESTAMP) from a report made elsewhere: a copy
    of it and of its raw CSV export."""
    from tracer.kernel.spec import Variant
    from tracer.ncu.reader import csv_beside, read_report
    from tracer.store.atomic import copy_file
    from tracer.schemas import with_header
    from tracer.store.rundir import default_run_dir, staged, write_json

    report = read_report(path)
    label = label or path.name.split(".")[0]
    output = output or default_run_dir(f"profile-{label}")
    variant = label if label in {v.value for v in Variant} else None
    with staged(output) as tmp:
        copies = [path] + ([csv_beside(path)] if path.suffix == ".ncu-rep" and csv_beside(path).is_file() else [])
        for src in copies:
            copy_file(src, tmp / src.name)
        target = ProfiledTarget(label=label, variant=variant, report=replace(report, path=path.name), exit=None, files=tuple(p.name for p in copies))
        run = ProfileRun(str(output), report.clock_control, (target,), {"imported_from": str(path.resolve())})
        write_json(tmp / "command.json", with_header("command", {"imported_from": str(path.resolve()), "backend": "import"}))
        write_json(tmp / "profile.json", run.to_json())
    return run


def sass_summaries(runs: Sequence[ProfileRun], a: str, b: str, config: str | None) -> str:
    """`tracer kernels diff A B` for the kernels the runs profiled: their config, dtype and arch."""
    from tracer.kernel import compile as nvrtc_compile
    from tracer.kernel import disasm
    from tracer.kernel.spec import KernelKey, OutFormat, parse_arch, parse_in_dtype, parse_variant
    from tracer.kernel.text import changed_lines, format_summary

    cfg, how = sass_config(runs, config)
    launches = [x for r in runs for t in r.targets for x in t.report.launches]
    cc = next((x.cc for x in launches if x.cc), "9.0")
    arch = parse_arch("sm_" + cc.replace(".", ""))
    dtype = parse_in_dtype(runs[0].meta.get("in_dtype", "bf16"))
    keys = [KernelKey(variant=parse_variant(v), config=cfg, in_dtype=dtype, out_format=OutFormat.E4M3, arch=arch) for v in (a, b)]
    texts = [disasm.sass(k) for k in keys]
    out = [f"\nSASS ({arch}, {dtype.value} -> e4m3, config {cfg}: {how}):"]
    for key, text in zip(keys, texts):
        out.append(format_summary(nvrtc_compile.describe(key), disasm.summarize(text, disasm.resource_usage(key))))
    changed = changed_lines(disasm.opcode_diff(texts[0], texts[1], a, b))
    out.append(f"opcode stream: {changed} lines differ (`tracer kernels diff {a} {b} --config {cfg} --full` prints them)")
    return "\n".join(out)


def sass_config(runs: Sequence[ProfileRun], config: str | None) -> tuple[Any, str]:
    """The config the profiled kernels used: --config, the run's, or the heuristic's pick as the run made it."""
    from tracer.kernel.spec import Config, parse_in_dtype, pick_config

    if config and config != "auto":
        return Config.parse(config), "given by --config"
    meta = runs[0].meta
    if meta.get("config") not in (None, "auto"):
        return Config.parse(meta["config"]), "the run's --config"
    sms = next((x.sms for r in runs for t in r.targets for x in t.report.launches if x.sms), None)
    if meta.get("cast_shape") and sms:
        rows, cols = meta["cast_shape"]
        cfg = pick_config(parse_in_dtype(meta.get("in_dtype", "bf16")), rows, cols, sms)
        return cfg, f"the heuristic's pick for {rows}x{cols} on {sms} SMs, as the run used"
    raise UsageError("the run does not say which config its kernels used: give --config LOAD/STORE for the SASS")


def comparison(runs: Sequence[ProfileRun], *, baseline: str, by: str, kernel: str | None = None, nvtx: str | None = None,
               as_json: bool = False, sass: Sequence[str] | None = None, config: str | None = None) -> tuple[Any, str]:
    """(the Comparison, what `profile compare` prints: the table or its JSON, then with `sass` the
    two variants side by side and their SASS summaries)."""
    import json
    from dataclasses import asdict

    from tracer.errors import unknown
    from tracer.ncu.compare import GroupBy, compare_runs
    from tracer.ncu.text import format_comparison, format_pair
    from tracer.schemas import with_header

    if by not in {g.value for g in GroupBy}:
        raise unknown("--by", by, [g.value for g in GroupBy])
    cmp = compare_runs(runs, baseline, GroupBy(by), kernel, nvtx)
    text = [json.dumps(with_header("profile-compare", asdict(cmp)), indent=1) if as_json else format_comparison(cmp)]
    if sass:
        a, b = sass
        text += [f"\n{a} vs {b}:\n" + format_pair(cmp, a, b), sass_summaries(runs, a, b, config)]
    return cmp, "\n".join(text)
