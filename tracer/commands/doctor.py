"""`tracer doctor`: what tracer needs, found or not, looked up as the commands look it up (tracer.doctor)."""
from __future__ import annotations

import argparse
import json

from tracer.errors import ToolMissingError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check the shipped files, GPU, driver, torch, NVRTC, CUPTI and the Nsight tools")
    p.add_argument("--json", action="store_true", help="print the checks and advice as JSON")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from tracer.doctor import format_text, run_checks

    report = run_checks()
    print(json.dumps(report.to_json(), indent=1) if args.json else format_text(report))
    missing = [c.name for c in report.checks if c.missing_required]
    if missing:
        raise ToolMissingError(f"doctor: required {', '.join(missing)} not found (see above)")
    return 0
