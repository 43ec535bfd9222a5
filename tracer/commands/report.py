"""`tracer report` and `tracer demo`: the evidence on one self-contained HTML page."""
from __future__ import annotations

import argparse
from pathlib import Path

from tracer.cliargs import open_source
from tracer.store.outpath import file_output


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="one self-contained HTML page from run directories and campaign stores")
    r.add_argument("sources", type=Path, nargs="+", help="trace run dirs or files, sanitize output dirs, campaign stores, "
                   "profile run dirs")
    r.add_argument("-o", "--output", type=file_output, default=Path("report.html"), help="the HTML file to write (default report.html)")
    r.add_argument("--range", help="timeline: only NVTX ranges matching this regex")
    r.set_defaults(func=cmd_report)
    d = sub.add_parser("demo", help="the whole product on sample data captured on an H200 (no GPU needed)")
    d.add_argument("-o", "--output", type=Path,
                   help="folder for the pictures, report and Perfetto export (default: a new tracer-demo-* folder in the "
                        "system's temp directory)")
    d.set_defaults(func=cmd_demo)


def cmd_report(args: argparse.Namespace) -> int:
    from tracer.views.report.build import build_report
    from tracer.store.outpath import guard_output
    from tracer.analysis.selection import parse_range

    rx = parse_range(args.range)
    guard_output(args.output, args.sources)
    rep = build_report([open_source(s) for s in args.sources], "tracer report", rx)
    out = rep.write(args.output)
    print(f"wrote {out} ({len(rep.sections)} sections)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from tracer.app.demo import run_demo

    print(run_demo(args.output))
    return 0
