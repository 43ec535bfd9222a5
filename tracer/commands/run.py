"""`tracer run WORKLOAD`: run a seed workload with the corruption detector, print the verdicts."""
from __future__ import annotations

import argparse
import json

from tracer.cliargs import add_workload_options, spec_from_args
from tracer.errors import ChecksFailed


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a workload with the corruption detector")
    p.add_argument("workload", help="a built-in workload name or a profile YAML")
    add_workload_options(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--device", default="cuda", help="cuda (default), or cpu for torch_composite only")
    p.add_argument("--no-fail-on-check", action="store_true",
                   help="exit 0 even when a check fails (for running under another tool, e.g. compute-sanitizer)")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from tracer.workloads.runner import format_report, run_workload

    report = run_workload(spec_from_args(args), args.device)
    print(json.dumps(report.to_json(), indent=1) if args.json else format_report(report))
    if not report.passed and not args.no_fail_on_check:
        raise ChecksFailed(f"{report.spec.name}: {sum(not v.passed for v in report.verdicts)} check(s) failed")
    return 0
