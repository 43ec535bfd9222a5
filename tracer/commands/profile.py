"""`tracer profile`: Nsight Compute on a workload's variants or on any command; `profile compare`
and `profile import` on run directories and reports made elsewhere."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tracer.errors import TracerError, UsageError
from tracer.store.rundir import default_run_dir, environment, staged, write_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="Nsight Compute counters per kernel launch (also: compare RUN, import FILE)")
    p.add_argument("args", nargs="*", metavar="WORKLOAD | compare RUN... | import FILE",
                   help="a built-in workload or profile YAML (or a command after --); `compare RUN...`; "
                        "`import FILE.ncu-rep|FILE.csv`")
    w = p.add_argument_group("what to profile")
    w.add_argument("--variant", action="append", default=[],
                   help="kernel variant of the workload (repeatable, one ncu run each; 'all': every fence variant)")
    w.add_argument("--config", help="LOAD/STORE widths of the workload's kernels, or auto (compare --sass: the SASS config)")
    w.add_argument("--shape", help="shape override of the workload")
    w.add_argument("--steps", type=int, default=1, help="workload steps (default 1)")
    w.add_argument("--kernel", help="only kernels whose name matches this regex (workloads: the cast-transpose kernel)")
    w.add_argument("--range", action="append", default=[], dest="ranges", metavar="NAME",
                   help="only kernels inside tracer's NVTX range NAME, e.g. step0/layer0/mb0/cast_transpose "
                        "(repeatable); compare: a glob on the innermost range")
    w.add_argument("--nvtx-include", action="append", default=[], metavar="EXPR", help="ncu --nvtx-include EXPR, verbatim")
    w.add_argument("--launch-skip", type=int, default=0, help="matching launches to skip first")
    w.add_argument("--launch-count", type=int, help="matching launches to profile (default: all)")
    n = p.add_argument_group("ncu")
    n.add_argument("--section", action="append", default=[], help="a section on top of SpeedOfLight, "
                   "MemoryWorkloadAnalysis, WarpStateStats, Occupancy, LaunchStats (repeatable)")
    n.add_argument("--source-counters", action="store_true", help="add SourceCounters (per-instruction stalls; slower)")
    n.add_argument("--clock-control", default="none", help="none (default: the GPU's own clocks) or base (locked)")
    n.add_argument("--cache-control", default="all", help="all (default: flush caches before each pass) or none")
    n.add_argument("--timeout", type=float, default=1800, help="seconds per ncu run before its process group is killed")
    c = p.add_argument_group("compare")
    c.add_argument("--baseline", default="none", help="the group the others are compared with (default: none)")
    c.add_argument("--by", default="auto", help="auto (default), label, nvtx, kernel: what makes a group")
    c.add_argument("--sass", nargs=2, metavar=("A", "B"), help="variants A and B side by side with their SASS summaries")
    c.add_argument("--plot", type=Path, help="write the stall breakdown and throughput chart here (.png, .svg)")
    p.add_argument("--label", help="import: the name of the report's group (default: the file's stem)")
    p.add_argument("-o", "--output", type=Path, help="run directory (default runs/profile-NAME-TIMESTAMP)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_profile)


def cmd_profile(args: argparse.Namespace) -> int:
    extra = list(getattr(args, "command_after_dashdash", []) or [])
    head = args.args[:1]
    if head == ["compare"] and not extra:
        return cmd_compare(args, args.args[1:])
    if head == ["import"] and not extra:
        if len(args.args) != 2:
            raise UsageError("usage: tracer profile import FILE.ncu-rep|FILE.csv")
        return cmd_import(args, Path(args.args[1]))
    if extra and args.args:
        raise UsageError("give either WORKLOAD or a command after --, not both")
    if not extra and len(args.args) != 1:
        raise UsageError("give one WORKLOAD (or a command after --, or `compare RUN`, or `import FILE`)")
    return cmd_run(args, extra)


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"--{name}={value} must be >= 1")


def workload_targets(args: argparse.Namespace) -> tuple[str, list[Any], str, dict[str, Any]]:
    """(name, one Target per variant, default kernel regex, meta) for a built-in workload or profile."""
    from tracer.commands.run import spec_from_args
    from tracer.kernel.spec import FENCE_VARIANTS
    from tracer.ncu.runner import Target

    _positive("steps", args.steps)
    variants = [v.value for v in FENCE_VARIANTS] if "all" in args.variant else list(dict.fromkeys(args.variant))
    targets, spec = [], None
    for v in variants or [None]:
        ns = argparse.Namespace(workload=args.args[0], variant=v, config=args.config, shape=args.shape, steps=args.steps,
                                seed=None, layers=None, microbatches=None, checkpointing=None)
        spec = spec_from_args(ns)
        cmd = [sys.executable, "-m", "tracer", "run", args.args[0], "--no-fail-on-check", "--steps", str(args.steps)]
        for flag, value in (("variant", v), ("config", args.config), ("shape", args.shape)):
            cmd += [f"--{flag}", value] if value else []
        targets.append(Target(v or spec.variant.value, tuple(cmd), v or spec.variant.value))
    assert spec is not None
    kernel = "^(" + "|".join(spec.kernel_filter or ("cast_transpose",)) + ")$"
    meta = {"workload": spec.name, "shape": args.shape, "config": str(spec.config) if spec.config else "auto",
            "in_dtype": spec.in_dtype.value, "cast_shape": [spec.tokens, spec.out_dim]}
    return spec.name, targets, kernel, meta


def command_target(extra: list[str]) -> tuple[str, list[Any], None, dict[str, Any]]:
    from tracer.ncu.runner import Target

    script = next((a for a in extra if a.endswith(".py")), extra[0])
    label = Path(script).name.removesuffix(".py") or "command"
    return label, [Target(label, tuple(extra))], None, {"command": extra}


def ncu_options(args: argparse.Namespace, default_kernel: str | None) -> Any:
    from tracer.ncu.argv import (CacheControl, ClockControl, NcuOptions, kernel_regex, non_negative, nvtx_range_include,
                                 parse_enum, parse_sections)

    non_negative("launch-skip", args.launch_skip)
    _positive("launch-count", args.launch_count)
    regex = args.kernel or default_kernel
    return NcuOptions(Path("report"), sections=parse_sections(args.section, args.source_counters),
                      kernel=kernel_regex(regex) if regex else None, launch_skip=args.launch_skip,
                      launch_count=args.launch_count,
                      nvtx_include=tuple(nvtx_range_include(r) for r in args.ranges) + tuple(args.nvtx_include),
                      clock_control=parse_enum("clock control", args.clock_control, ClockControl),  # type: ignore[arg-type]
                      cache_control=parse_enum("cache control", args.cache_control, CacheControl))  # type: ignore[arg-type]


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from tracer.ncu.runner import profile_target
    from tracer.ncu.store import ProfileRun
    from tracer.ncu.tool import find_ncu

    name, targets, default_kernel, meta = command_target(extra) if extra else workload_targets(args)
    opts = ncu_options(args, default_kernel)
    binary = find_ncu()
    final = args.output or default_run_dir(f"profile-{name}")
    with staged(final) as tmp:
        (tmp / "logs").mkdir()
        runs = []
        for t in targets:
            runs.append(profile_target(binary, opts, t, tmp, tmp / "logs", args.timeout))
            print(f"  ncu {t.label}: exit {runs[-1].exit} ({runs[-1].seconds:.0f} s)", file=sys.stderr)
        write_json(tmp / "command.json", {"ncu": binary, "clock_control": opts.clock_control.value,
                                          "cache_control": opts.cache_control.value, "sections": list(opts.sections),
                                          "kernel": opts.kernel, "nvtx_include": list(opts.nvtx_include),
                                          "targets": [r.to_json() for r in runs]})
        write_json(tmp / "environment.json", environment())
        profiled, error = read_targets(tmp, runs)
        run = ProfileRun(str(final), opts.clock_control.value, tuple(profiled), meta)
        if error is None:
            write_json(tmp / "profile.json", run.to_json())
    print(f"run directory: {final}", file=sys.stderr)
    if error is not None:
        raise type(error)(f"{error} (the reports are in {final}; read them with `tracer profile import`)")
    for r in runs:
        if r.exit not in (0, None):
            print(f"tracer: warning: {r.label} exited {r.exit} under ncu; see {final}/logs/{r.log}", file=sys.stderr)
    return show_run(run, args)


def read_targets(folder: Path, runs: list[Any]) -> tuple[list[Any], TracerError | None]:
    from tracer.ncu.reader import read_report
    from tracer.ncu.store import ProfiledTarget

    out = []
    for r in runs:
        try:
            report = read_report(folder / r.report)
        except TracerError as exc:
            return out, exc
        files = tuple(f for f in (r.report, r.csv) if f)
        out.append(ProfiledTarget(r.label, r.variant, replace(report, path=r.report), r.exit, files))
    return out, None


def show_run(run: Any, args: argparse.Namespace) -> int:
    from tracer.ncu.text import format_run

    if args.json:
        print(json.dumps(run.to_json(), indent=1))
        return 0
    print(format_run(run))
    if len(run.targets) > 1:
        print()
        return cmd_compare(args, [run.path], loaded=[run])
    return 0


def cmd_import(args: argparse.Namespace, path: Path) -> int:
    from tracer.kernel.spec import Variant
    from tracer.ncu.reader import csv_beside, read_report
    from tracer.ncu.store import ProfiledTarget, ProfileRun

    report = read_report(path)
    label = args.label or path.name.split(".")[0]
    variant = label if label in {v.value for v in Variant} else None
    final = args.output or default_run_dir(f"profile-{label}")
    with staged(final) as tmp:
        copies = [path] + ([csv_beside(path)] if path.suffix == ".ncu-rep" and csv_beside(path).is_file() else [])
        for src in copies:
            shutil.copyfile(src, tmp / src.name)
        target = ProfiledTarget(label, variant, replace(report, path=path.name), None, tuple(p.name for p in copies))
        run = ProfileRun(str(final), report.clock_control, (target,), {"imported_from": str(path.resolve())})
        write_json(tmp / "command.json", {"imported_from": str(path.resolve()), "backend": "import"})
        write_json(tmp / "profile.json", run.to_json())
    print(f"run directory: {final}", file=sys.stderr)
    return show_run(run, args)


def cmd_compare(args: argparse.Namespace, sources: list[str], loaded: list[Any] | None = None) -> int:
    from tracer.ncu.compare import GroupBy, compare_runs
    from tracer.ncu.store import load_run
    from tracer.ncu.text import format_comparison, format_pair

    if not sources:
        raise UsageError("usage: tracer profile compare RUN [RUN...] [--baseline VARIANT]")
    runs = loaded or [load_run(Path(s)) for s in sources]
    try:
        by = GroupBy(args.by)
    except ValueError:
        from tracer.errors import unknown

        raise unknown("--by", args.by, [g.value for g in GroupBy]) from None
    glob = args.ranges[0] if loaded is None and args.ranges else None
    cmp = compare_runs(runs, args.baseline, by, args.kernel if loaded is None else None, glob)
    if args.json:
        print(json.dumps(asdict(cmp), indent=1))
    else:
        print(format_comparison(cmp))
    if args.sass:
        print(f"\n{args.sass[0]} vs {args.sass[1]}:\n" + format_pair(cmp, *args.sass))
        print(sass_summaries(args, runs, *args.sass))
    if args.plot:
        from tracer.plots.ncu import draw_comparison
        from tracer.plots.timeline import save

        print(f"wrote {save(draw_comparison(cmp), args.plot)}")
    return 0


def sass_summaries(args: argparse.Namespace, runs: list[Any], a: str, b: str) -> str:
    """`tracer kernels diff A B` for the kernels the run profiled: its config, dtype and arch."""
    from tracer.commands.kernels import format_summary
    from tracer.kernel import compile as nvrtc_compile
    from tracer.kernel import disasm
    from tracer.kernel.spec import KernelKey, OutFormat, parse_arch, parse_in_dtype, parse_variant

    cfg, how = sass_config(args, runs)
    launches = [x for r in runs for t in r.targets for x in t.report.launches]
    cc = next((x.cc for x in launches if x.cc), "9.0")
    arch = parse_arch("sm_" + cc.replace(".", ""))
    dtype = parse_in_dtype(runs[0].meta.get("in_dtype", "bf16"))
    keys = [KernelKey(parse_variant(v), cfg, dtype, OutFormat.E4M3, arch) for v in (a, b)]
    texts = [disasm.sass(k) for k in keys]
    out = [f"\nSASS ({arch}, {dtype.value} -> e4m3, config {cfg}: {how}):"]
    for key, text in zip(keys, texts):
        out.append(format_summary(nvrtc_compile.describe(key), disasm.summarize(text, disasm.resource_usage(key))))
    diff = disasm.opcode_diff(texts[0], texts[1], a, b)
    changed = sum(1 for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))
    out.append(f"opcode stream: {changed} lines differ (`tracer kernels diff {a} {b} --config {cfg} --full` prints them)")
    return "\n".join(out)


def sass_config(args: argparse.Namespace, runs: list[Any]) -> tuple[Any, str]:
    from tracer.kernel.spec import Config, parse_in_dtype, pick_config

    if args.config and args.config != "auto":
        return Config.parse(args.config), "given by --config"
    meta = runs[0].meta
    if meta.get("config") not in (None, "auto"):
        return Config.parse(meta["config"]), "the run's --config"
    sms = next((x.sms for r in runs for t in r.targets for x in t.report.launches if x.sms), None)
    if meta.get("cast_shape") and sms:
        rows, cols = meta["cast_shape"]
        cfg = pick_config(parse_in_dtype(meta.get("in_dtype", "bf16")), rows, cols, sms)
        return cfg, f"the heuristic's pick for {rows}x{cols} on {sms} SMs, as the run used"
    raise UsageError("the run does not say which config its kernels used: give --config LOAD/STORE for the SASS")
