"""`tracer diff A B`: two runs of one kind compared; gates for CI (docs/diff.md has the JSON and exit codes)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from tracer.cliargs import add_pair_options, choose_pairs, open_source
from tracer.errors import ChecksFailed, UsageError
from tracer.store.outpath import file_output, guard_output


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="compare two runs: verdicts new and gone, time changed beyond noise")
    p.add_argument("a", type=Path, help="A (before): a trace, job, sanitize, campaign or profile run, or a trace file")
    p.add_argument("b", type=Path, help="B (after): of the same kind as A")
    add_pair_options(p, "A's recorded pairs, else all")
    p.add_argument("--hazards", action=argparse.BooleanOptionalAction, default=True, help="compare memory hazards (default on)")
    p.add_argument("--json", action="store_true", help="print the diff JSON (schema in docs/diff.md)")
    p.add_argument("--html", type=file_output, help="also write an HTML page here")
    p.add_argument("--plot", type=file_output, help="also write a picture here (.png or .svg): A's step over B's, changes coloured")
    p.add_argument("--targets", metavar="A,B", help="profile runs: compare target (variant) A of the first with B of the second")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level of the time tests (default 0.05)")
    p.add_argument("--fail-on-new-hazard", action="store_true", help="exit 1 on a hazard in B not in A, or when unknown")
    p.add_argument("--fail-on-new-finding", action="store_true", help="exit 1 on a sanitizer finding in B not in A")
    p.add_argument("--fail-on-regression", type=float, metavar="PCT",
                   help="exit 1 when a median got slower by PCT percent or more, beyond run-to-run noise")
    p.set_defaults(func=cmd_diff)


def _check(args: argparse.Namespace) -> None:
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha {args.alpha}: must be between 0 and 1, e.g. 0.05")
    if args.fail_on_regression is not None and not 0 <= args.fail_on_regression < float("inf"):  # NaN never trips the gate
        raise UsageError(f"--fail-on-regression {args.fail_on_regression}: a finite percentage of 0 or more, e.g. 5")
    if args.fail_on_new_hazard and not args.hazards:
        raise UsageError("--fail-on-new-hazard needs the hazard comparison: drop --no-hazards")
    outs = [p for p in (args.html, args.plot) if p is not None]
    for out in outs:
        guard_output(out, [args.a, args.b])
    if len(outs) == 2 and outs[0].resolve() == outs[1].resolve():
        raise UsageError(f"--html and --plot both name {outs[0]}; give two files")


def cmd_diff(args: argparse.Namespace) -> int:
    from tracer.app.diff import diff_artifacts
    from tracer.artifact import JobRun, TraceRun
    from tracer.views.report.diff_text import format_diff

    _check(args)
    a = open_source(args.a)
    b = a if args.a.resolve() == args.b.resolve() else open_source(args.b)
    recorded = a.pair_spec if isinstance(a, (TraceRun, JobRun)) else None
    given = any(getattr(args, k) for k in ("pairs", "producer", "consumer"))
    d = diff_artifacts(a, b, pairs=choose_pairs(args, recorded) if given else None, hazards=args.hazards, alpha=args.alpha,
                       targets=_targets(args.targets))
    print(json.dumps(d.to_json(), indent=1) if args.json else format_diff(d))
    _views(d, args)
    problems = d.failures(args.fail_on_new_hazard, args.fail_on_new_finding, args.fail_on_regression)
    if problems:
        raise ChecksFailed("; ".join(problems))
    return 0


def _targets(text: str | None) -> tuple[str, str] | None:
    parts = None if text is None else text.split(",")
    if parts is not None and (len(parts) != 2 or not all(parts)):
        raise UsageError(f"--targets {text!r}: two target labels, A,B (e.g. none,device_before_atomic)")
    return None if parts is None else (parts[0], parts[1])


def _views(d, args: argparse.Namespace) -> None:
    import sys

    if args.html:
        from tracer.views.report.diff_html import write_diff_html

        print(f"wrote {write_diff_html(d, args.html)}", file=sys.stderr)
    if args.plot:
        from tracer.views.plots.diff import draw_diff
        from tracer.views.plots.timeline import save

        print(f"wrote {save(draw_diff(d), args.plot)}", file=sys.stderr)
