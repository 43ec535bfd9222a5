"""`tracer campaign run|status|report`: variants x configs x trials, resumable, with statistics."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("campaign", help="ablation campaigns: failure rates with confidence intervals")
    cs = p.add_subparsers(dest="campaign_command", metavar="ACTION", required=True)
    r = cs.add_parser("run", help="run (or resume) a campaign")
    r.add_argument("profile", help="campaign profile YAML or a name in profiles/campaigns")
    r.add_argument("-o", "--store", type=Path, help="campaign store (default runs/NAME.campaign.sqlite)")
    r.add_argument("--executor", help="local (one worker per visible GPU) or slurm (submitit job array)")
    r.add_argument("--workers", type=int, help="local: number of workers (default: one per GPU)")
    r.add_argument("--partition", help="slurm: partition (default: the profile's)")
    r.add_argument("--time-min", type=int, help="slurm: minutes per task (default: the profile's)")
    r.add_argument("--gpus-per-task", type=int, help="slurm: GPUs per task (default: the profile's)")
    r.add_argument("--tasks", type=int, help="slurm: array size")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)
    s = cs.add_parser("status", help="trials done per cell")
    s.add_argument("store", type=Path, help="campaign store (SQLite)")
    s.set_defaults(func=cmd_status)
    rep = cs.add_parser("report", help="failure rates, intervals, tests against the baseline")
    rep.add_argument("store", type=Path, help="campaign store (SQLite)")
    rep.add_argument("--json", action="store_true", help="print the report as JSON")
    rep.add_argument("--baseline", help="cell label to compare against (default: the profile's)")
    rep.set_defaults(func=cmd_report)


def cmd_run(args: argparse.Namespace) -> int:
    from tracer.campaign.chunks import remaining_trials
    from tracer.campaign.executors import Options, execute, open_store
    from tracer.campaign.grid import load_campaign
    from tracer.campaign.report import format_report, progress, report_data

    spec = load_campaign(args.profile)
    opts = Options(executor=args.executor, workers=args.workers, partition=args.partition, time_min=args.time_min, gpus_per_task=args.gpus_per_task,
                   tasks=args.tasks)
    store = open_store(spec, args.store)
    remaining = remaining_trials(store, spec)
    print(f"campaign {spec.name}: {len(spec.cells())} cells x {spec.trials_per_cell} trials, "
          f"{remaining} to run, store {store.path}", file=sys.stderr)
    bar, tick = progress(store, remaining, not args.no_progress and sys.stderr.isatty())
    with bar:
        events = execute(store, spec, opts, tick)
    for e in events:
        print(f"tracer: crash recorded: {e[:300]}", file=sys.stderr)
    print(format_report(report_data(store, None)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from tracer.campaign.report import format_status
    from tracer.campaign.trials_db import Store

    print(format_status(Store.open(args.store, readonly=True)))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tracer.campaign.report import format_report, report_data
    from tracer.campaign.trials_db import Store

    d = report_data(Store.open(args.store, readonly=True), args.baseline)
    print(json.dumps(d, indent=1, default=str) if args.json else format_report(d))
    return 0
