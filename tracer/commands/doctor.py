"""`tracer doctor`: what tracer needs, found or not, looked up as the commands look it up (tracer.doctor)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tracer.errors import ToolMissingError, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check the shipped files, GPU, driver, torch, NVRTC, CUPTI and the Nsight tools")
    p.add_argument("--json", action="store_true", help="print the checks and advice as JSON")
    p.add_argument("--fix-nsys", action="store_true",
                   help="let an nsys whose QdstrmImporter lacks elfutils write reports: copy libdw/libelf from drgn "
                        "(the [nsys] extra) into tracer's cache, used by nsys only")
    p.add_argument("--from", dest="libs_from", type=Path, metavar="PATH",
                   help="with --fix-nsys: take the libraries from this drgn wheel or folder instead of the installed drgn")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from tracer.doctor import format_text, run_checks

    if args.libs_from is not None and not args.fix_nsys:
        raise UsageError("--from needs --fix-nsys")
    if args.fix_nsys:
        print(fix_nsys(args.libs_from), file=sys.stderr)
    report = run_checks()
    print(json.dumps(report.to_json(), indent=1) if args.json else format_text(report))
    missing = [c.name for c in report.checks if c.missing_required]
    if missing:
        raise ToolMissingError(f"doctor: required {', '.join(missing)} not found (see above)")
    return 0


def fix_nsys(source: Path | None) -> str:
    """What --fix-nsys did: nothing when nsys writes reports as installed, else the libraries it copied."""
    from tracer.capture.nsys import find_writer

    writer = find_writer(prepare=True, source=source)
    if writer.libs is None:
        return f"nsys: {writer.describe()} writes reports as installed: nothing to fix"
    done = "prepared" if writer.prepared_now else "already prepared"
    return f"nsys: {done} {writer.libs.describe()}; {writer.nsys} writes reports with it"
