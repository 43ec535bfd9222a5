"""`tracer sanitize [run] WORKLOAD | -- command`, `sanitize import FILE`, `sanitize selftest`: sanitizer verdicts."""
from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from tracer.errors import ChecksFailed
from tracer.store.outpath import file_output
from tracer.sanitize.tools import RACECHECK_LEVELS, RACECHECK_REPORTS, parse_tools, tool_names

DEFAULT_ACTION = "run"  # `tracer sanitize WORKLOAD` is `tracer sanitize run WORKLOAD`
SHARED: dict[str, tuple[str, dict]] = {  # options of several actions: flags -> (r)un, (i)mport, (s)elftest, add_argument keywords
    "--tool": ("ri", {"default": "all", "help": f"{', '.join(tool_names())}, all (default; import: the file's)"}),
    "--print-limit": ("rs", {"type": int, "default": 1000, "help": "records compute-sanitizer prints per run (default 1000)"}),
    "--leak-check": ("rs", {"action": "store_true", "help": "memcheck --leak-check full"}),
    "--racecheck-report": ("rs", {"default": "analysis", "help": ", ".join(v + " (default)" * (v == "analysis") for v in RACECHECK_REPORTS)}),
    "--racecheck-detect-level": ("rs", {"default": "warn", "help": ", ".join(v + " (default)" * (v == "warn") for v in RACECHECK_LEVELS)}),
    "--jobs": ("rs", {"type": int, "default": 4, "help": "sanitizer runs at once (they share the GPU)"}),
    "--timeout": ("rs", {"type": float, "default": 1800, "help": "seconds per tool run before the process group is killed"}),
    "-o --output": ("rs", {"type": Path, "help": "output directory (default runs/sanitize-NAME-TIMESTAMP)"}),
    "--suppressions": ("ris", {"type": Path, "action": "append", "default": [], "help": "extra suppressions YAML (repeatable)"}),
    "--no-default-suppressions": ("ris", {"action": "store_true", "help": "do not load the shipped default.yaml"}),
    "--json": ("ri", {"action": "store_true", "help": "print the report as JSON"}),
    "--junit": ("ri", {"type": file_output, "help": "also write JUnit XML here"}),
    "--sarif": ("ri", {"type": file_output, "help": "also write SARIF 2.1.0 here"}),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sanitize", help="compute-sanitizer verdicts", description="`tracer sanitize WORKLOAD` is `sanitize run WORKLOAD`")
    ss = p.add_subparsers(dest="sanitize_command", metavar="ACTION", required=True)
    r = ss.add_parser("run", help="compute-sanitizer on a workload or `-- command` (the default action)")
    r.add_argument("workload", nargs="?", help="a built-in workload or profile YAML; or give a command after --")
    r.add_argument("--filter", help="off (default): every kernel; on: the profile's kernel filter; both: side by side")
    r.add_argument("--only-kernel", action="append", default=[], help="check only this kernel (readable name; repeatable)")
    r.add_argument("--exclude-kernel", action="append", default=[], help="do not check this kernel (repeatable)")
    r.add_argument("--no-verify-filter", action="store_true", help="skip checking that filters match a launched kernel")
    r.add_argument("--steps", type=int, help="steps of a built-in workload (default 1 under the sanitizer)")
    r.add_argument("--shape", help="shape override of a built-in workload")
    r.add_argument("--variant", action="append", default=[], help="kernel variant of a built-in workload (repeatable)")
    i = ss.add_parser("import", help="verdicts from compute-sanitizer output made elsewhere")
    i.add_argument("files", type=Path, nargs="+", metavar="FILE", help="FILE.xml (and FILE.log or .txt), text log, folder")
    i.add_argument("--log", type=Path, help="the text output of one FILE.xml (default FILE.log or FILE.txt beside it)")
    s = ss.add_parser("selftest", help="every planted workload and the clean one under every tool")
    s.add_argument("--filter", choices=("on", "off"), default="off", help="with the profiles' kernel filters, or not (default)")
    for flag, (where, kw) in SHARED.items():
        for q in ({"r": r, "i": i, "s": s}[c] for c in where):
            q.add_argument(*flag.split(), **kw)
    for q, func in ((r, cmd_run), (i, cmd_import), (s, cmd_selftest)):
        q.set_defaults(func=func)


def _run(args: argparse.Namespace, jobs: list, name: str, command: dict) -> list:
    from tracer.sanitize.plan import Settings, load_suppressions, progress_line, run_into

    runs, final = run_into(args.output, name, jobs, load_suppressions(args.suppressions, not args.no_default_suppressions),
                           Settings(**{f.name: getattr(args, f.name) for f in fields(Settings)}), command,
                           lambda job, run: print(progress_line(job, run), file=sys.stderr))
    print(f"outputs: {final}", file=sys.stderr)
    return runs


def emit(runs: list, args: argparse.Namespace) -> int:
    from tracer.sanitize.report import format_text, raise_if_not_clean, to_json, write_reports

    write_reports(runs, args.junit, args.sarif, [*vars(args).get("files", []), *map(vars(args).get, ("log", "workload")), *args.suppressions])
    print(to_json(runs) if args.json else format_text(runs))
    raise_if_not_clean(runs)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from tracer.sanitize.plan import jobs_for, plan

    tools = parse_tools(args.tool)
    targets = plan(args.workload, args.command_after_dashdash, steps=args.steps, shape=args.shape, variants=args.variant,
                   only=args.only_kernel, exclude=args.exclude_kernel, mode=args.filter,
                   verify_timeout=None if args.no_verify_filter else args.timeout)
    command = {"targets": [t.to_json() for t in targets], "tools": [t.value for t in tools]}
    return emit(_run(args, jobs_for(targets, tools), targets[0].name, command), args)


def cmd_import(args: argparse.Namespace) -> int:
    from tracer.sanitize.plan import load_suppressions
    from tracer.sanitize.runner import import_many

    rules = load_suppressions(args.suppressions, not args.no_default_suppressions)
    return emit(import_many(args.files, None if args.tool == "all" else parse_tools(args.tool)[0].value, rules, args.log), args)


def cmd_selftest(args: argparse.Namespace) -> int:
    from tracer.sanitize.selftest import selftest_jobs, selftest_report

    text, failures = selftest_report(_run(args, selftest_jobs(args.filter == "on"), "selftest", {"selftest": True, "filter": args.filter}))
    print(text)
    if failures:
        raise ChecksFailed(f"selftest: {len(failures)} expectation(s) not met")
    return 0
