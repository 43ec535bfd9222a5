"""`tracer sanitize`: compute-sanitizer runs as verdicts; `sanitize import` and `sanitize selftest`."""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tracer import resources
from tracer.errors import ChecksFailed, ToolMissingError, UsageError, unknown
from tracer.sanitize.argv import SanitizeOptions, Tool, parse_tools
from tracer.sanitize.model import SanVerdict, ToolRun
from tracer.sanitize.report import format_text, to_json, to_junit, to_sarif
from tracer.sanitize.runner import filter_matches, find_sanitizer, import_outputs, kernel_filter, run_tool
from tracer.sanitize.suppress import DEFAULT_FILE, Rule, load_rules
from tracer.store.rundir import default_run_dir, staged, write_json

FILTER_MODES = ("on", "off", "both")
ROOT = resources.KERNEL_DIR.parent  # SARIF names kernels/<file> relative to this
PLANTED = {"planted_race": Tool.RACECHECK, "planted_oob": Tool.MEMCHECK,
           "planted_uninit": Tool.INITCHECK, "planted_barrier": Tool.SYNCCHECK}
SELFTEST_SHAPE = "256x256x256"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sanitize", help="compute-sanitizer runs parsed into verdicts (also: import FILE, selftest)")
    p.add_argument("args", nargs="*", metavar="WORKLOAD | import FILE | selftest",
                   help="a built-in workload or profile YAML (or a command after --); `import FILE.xml|FILE.log`; `selftest`")
    p.add_argument("--tool", default="all", help="memcheck, racecheck, initcheck, synccheck, all (default)")
    p.add_argument("--filter", default=None,
                   help="off (default): every kernel; on: the profile's kernel filter (faster, see README for what it "
                        "hides); both: side by side")
    p.add_argument("--only-kernel", action="append", default=[], help="check only this kernel (readable name; repeatable)")
    p.add_argument("--exclude-kernel", action="append", default=[], help="do not check this kernel (repeatable)")
    p.add_argument("--no-verify-filter", action="store_true", help="skip checking that filters match a launched kernel")
    p.add_argument("--suppressions", type=Path, action="append", default=[], help="extra suppressions YAML (repeatable)")
    p.add_argument("--no-default-suppressions", action="store_true", help=f"do not load {DEFAULT_FILE.name}")
    p.add_argument("--print-limit", type=int, default=1000)
    p.add_argument("--leak-check", action="store_true", help="memcheck --leak-check full")
    p.add_argument("--racecheck-report", default="analysis", help="analysis (default), hazard, all")
    p.add_argument("--racecheck-detect-level", default="warn", help="info, warn (default), error")
    p.add_argument("--jobs", type=int, default=4, help="sanitizer runs at once (they share the GPU)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per tool run before the process group is killed")
    p.add_argument("-o", "--output", type=Path, help="output directory (default runs/sanitize-NAME-TIMESTAMP)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--junit", type=Path, help="also write JUnit XML here")
    p.add_argument("--sarif", type=Path, help="also write SARIF 2.1.0 here")
    p.add_argument("--steps", type=int, help="steps of a built-in workload (default 1 under the sanitizer)")
    p.add_argument("--shape", help="shape override of a built-in workload")
    p.add_argument("--variant", action="append", default=[],
                   help="kernel variant of a built-in workload (repeatable: one run per variant, side by side)")
    p.set_defaults(func=cmd_sanitize)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise unknown(name, value, allowed)
    return value


def load_all_rules(args: argparse.Namespace) -> tuple[Rule, ...]:
    files = ([] if args.no_default_suppressions else [DEFAULT_FILE]) + list(args.suppressions)
    return tuple(r for f in files for r in load_rules(f))


def workload_target(name: str, steps: int | None, shape: str | None,
                    variant: str | None = None) -> tuple[str, list[str], tuple[str, ...]]:
    from tracer.kernel.spec import parse_variant
    from tracer.workloads.spec import load_workload

    spec = load_workload(name)
    cmd = [sys.executable, "-m", "tracer", "run", name, "--steps", str(steps or 1), "--no-fail-on-check"]
    if shape:
        cmd += ["--shape", shape]
    label = spec.name
    if variant:
        cmd += ["--variant", parse_variant(variant).value]
        label = f"{spec.name}.{variant}"
    return label, cmd, spec.kernel_filter


def launched_kernels(command: list[str], timeout: float) -> set[str]:
    """Mangled names of the kernels the target launches, from a CUPTI run of it (no sanitizer)."""
    import sqlite3

    from tracer.capture.cupti import capture

    with tempfile.TemporaryDirectory(prefix="tracer-kernels-") as tmp:
        out = Path(tmp) / "k.sqlite"
        capture(command, out, Path(tmp), timeout)
        if not out.is_file():
            raise UsageError("could not list the target's kernels to verify the filter (its CUPTI run wrote no trace)")
        con = sqlite3.connect(out)
        try:
            return {r[0] for r in con.execute("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                              "JOIN StringIds s ON s.id = k.mangledName")}
        finally:
            con.close()


def verify_filters(filters: list[str], command: list[str], timeout: float) -> None:
    try:
        names = launched_kernels(command, timeout)
    except ToolMissingError as exc:
        raise ToolMissingError(f"cannot verify the kernel filter ({exc}); pass --no-verify-filter to run unverified") from exc
    for flt in filters:
        if not filter_matches(flt, names):
            sample = ", ".join(sorted(names)[:5])
            raise UsageError(f"kernel filter {flt!r} matched none of the {len(names)} kernels the target launched "
                             f"(e.g. {sample}); a run with it would report clean without checking anything")


Target = tuple[str, list[str], list[tuple[str, list[str], list[str]]]]  # name, command, filter variants


def plan(args: argparse.Namespace, extra: list[str]) -> list[Target]:
    """[(name, command, [(filter label, include filters, exclude filters)])], one per target."""
    mode = _choice("--filter mode", args.filter or ("on" if args.only_kernel else "off"), FILTER_MODES)
    if extra:
        if args.args:
            raise UsageError("give either WORKLOAD or a command after --, not both")
        targets = [(Path(extra[0]).name, extra, ())]
    elif len(args.args) == 1:
        targets = [workload_target(args.args[0], args.steps, args.shape, v) for v in (args.variant or [None])]
    else:
        raise UsageError("give one WORKLOAD (or a command after --, or `import FILE`, or `selftest`)")
    out = []
    for name, command, project in targets:
        include = [kernel_filter(k) for k in (args.only_kernel or list(project))]
        exclude = [kernel_filter(k) for k in args.exclude_kernel]
        label = mode if include or mode == "off" else "off"  # a user command without --only-kernel has no filter
        runs = {"on": [(label, include, exclude)], "off": [("off", [], exclude)],
                "both": [("on", include, exclude), ("off", [], exclude)]}[mode]
        out.append((name, command, runs))
    return out


Job = tuple[str, list[str], str, list[str], list[str], Tool]  # name, command, filter label, include, exclude, tool


def jobs_for(name: str, command: list[str], variants: list[tuple[str, list[str], list[str]]], tools: tuple[Tool, ...]) -> list[Job]:
    return [(name, command, label, inc, exc, tool) for label, inc, exc in variants for tool in tools]


def execute(args: argparse.Namespace, jobs: list[Job], out: Path, rules: tuple[Rule, ...]) -> list[ToolRun]:
    """Run the jobs, up to --jobs at once; results in job order."""
    from concurrent.futures import ThreadPoolExecutor

    if args.jobs < 1:
        raise UsageError(f"--jobs={args.jobs} must be >= 1")
    binary = find_sanitizer()

    def one(job: Job) -> ToolRun:
        name, command, label, include, exclude, tool = job
        opts = SanitizeOptions(tool=tool, xml_path=out / f"{tool.value}-{name}-{label}.xml", print_limit=args.print_limit,
                               leak_check=args.leak_check, racecheck_report=args.racecheck_report,
                               racecheck_detect_level=args.racecheck_detect_level,
                               include_kernels=tuple(include), exclude_kernels=tuple(exclude))
        run = run_tool(binary, opts, command, out, name, rules, args.timeout, label)
        print(f"  {tool.value:<10} {name} filter={label}: {run.verdict.value} ({run.seconds:.0f} s)", file=sys.stderr)
        return run

    with ThreadPoolExecutor(args.jobs) as pool:
        return list(pool.map(one, jobs))


def emit(runs: list[ToolRun], args: argparse.Namespace, out: Path | None) -> int:
    if out is not None:
        (out / "report.json").write_text(to_json(runs))
    if args.junit:
        args.junit.write_text(to_junit(runs))
    if args.sarif:
        args.sarif.write_text(to_sarif(runs, ROOT))
    print(to_json(runs) if args.json else format_text(runs))
    bad = [r for r in runs if r.verdict is not SanVerdict.CLEAN]
    if bad:
        raise ChecksFailed(f"{len(bad)} of {len(runs)} sanitizer run(s) not clean")
    return 0


def cmd_sanitize(args: argparse.Namespace) -> int:
    extra = list(getattr(args, "command_after_dashdash", []) or [])
    _choice("--racecheck-report", args.racecheck_report, ("analysis", "hazard", "all"))
    _choice("--racecheck-detect-level", args.racecheck_detect_level, ("info", "warn", "error"))
    rules = load_all_rules(args)
    if args.args[:1] == ["import"]:
        if len(args.args) != 2:
            raise UsageError("usage: tracer sanitize import FILE.xml|FILE.log")
        tool = None if args.tool == "all" else parse_tools(args.tool)[0].value
        return emit([import_outputs(Path(args.args[1]), tool, rules)], args, None)
    if args.args[:1] == ["selftest"]:
        return selftest(args, rules)
    tools = parse_tools(args.tool)
    targets = plan(args, extra)
    name, command, variants = targets[0]
    filters = sorted({f for _, inc, exc in variants for f in inc + exc})
    if filters and not args.no_verify_filter:
        verify_filters(filters, command, args.timeout)
    final = args.output or default_run_dir(f"sanitize-{name}")
    with staged(final) as tmp:
        jobs = [j for n, c, v in targets for j in jobs_for(n, c, v, tools)]
        runs = execute(args, jobs, tmp, rules)
        write_json(tmp / "command.json", {"targets": [{"name": n, "argv": c, "filters": v} for n, c, v in targets],
                                          "tools": [t.value for t in tools]})
    print(f"outputs: {final}", file=sys.stderr)
    return emit(runs, args, final)


def selftest(args: argparse.Namespace, rules: tuple[Rule, ...]) -> int:
    """Every planted workload and the clean one under every tool: each tool must catch its planted
    defect and the clean workload must be clean under all four."""
    final = args.output or default_run_dir("sanitize-selftest")
    workloads = ["cast_transpose_dgrad", *PLANTED]
    jobs: list[Job] = []
    for w in workloads:
        name, command, project = workload_target(w, 1, SELFTEST_SHAPE)
        include = [kernel_filter(k) for k in project] if args.filter == "on" else []
        jobs += jobs_for(name, command, [("on" if include else "off", include, [])], tuple(Tool))
    with staged(final) as tmp:
        runs = execute(args, jobs, tmp, rules)
        (tmp / "report.json").write_text(to_json(runs))
    print(format_matrix([r.to_json() for r in runs], workloads))
    failures = selftest_failures(runs)
    for f in failures:
        print(f"FAIL: {f}")
    print(f"outputs: {final}")
    if failures:
        raise ChecksFailed(f"selftest: {len(failures)} expectation(s) not met")
    print("selftest: every planted defect caught; the clean workload is clean under all four tools")
    return 0


def selftest_failures(runs: list[ToolRun]) -> list[str]:
    out = []
    for r in runs:
        if r.workload == "cast_transpose_dgrad" and r.verdict is not SanVerdict.CLEAN:
            out.append(f"clean workload is {r.verdict.value} under {r.tool}")
        if PLANTED.get(r.workload) is not None and PLANTED[r.workload].value == r.tool and not r.errors_found:
            out.append(f"{r.tool} missed the defect planted in {r.workload} ({r.verdict.value})")
    return out


def format_matrix(runs: list[dict], workloads: list[str]) -> str:
    """Tool x workload verdicts from the runs' JSON."""
    cell = {(r["workload"], r["tool"]): r for r in runs}
    lines = [f"{'workload':<22}" + "".join(f"{t.value:>20}" for t in Tool)]
    for w in workloads:
        row = f"{w:<22}"
        for t in Tool:
            r = cell.get((w, t.value))
            n = sum(f["count"] for f in r["findings"]) if r else 0
            text = "-" if r is None else r["verdict"] + (f" ({n})" if n else "")
            mark = "*" if PLANTED.get(w) is t else " "
            row += f"{text + mark:>20}"
        lines.append(row)
    lines.append("(* the tool that must catch the planted defect)")
    return "\n".join(lines)
