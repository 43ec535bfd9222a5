"""`tracer campaign run|status|report`: variants x configs x trials, resumable, with statistics."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tracer.campaign.profile import check_run_options, load_campaign
from tracer.campaign.stats import check_baseline, compare_to_baseline, sprt, trials_needed
from tracer.campaign.store import Store
from tracer.errors import unknown

EXECUTORS = ("local", "slurm")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("campaign", help="ablation campaigns: failure rates with confidence intervals")
    cs = p.add_subparsers(dest="campaign_command", metavar="ACTION", required=True)
    r = cs.add_parser("run", help="run (or resume) a campaign")
    r.add_argument("profile", help="campaign profile YAML or a name in profiles/campaigns")
    r.add_argument("-o", "--store", type=Path, help="campaign store (default runs/NAME.campaign.sqlite)")
    r.add_argument("--executor", help="local (one worker per visible GPU) or slurm (submitit job array)")
    r.add_argument("--workers", type=int, help="local: number of workers (default: one per GPU)")
    r.add_argument("--partition")
    r.add_argument("--time-min", type=int)
    r.add_argument("--gpus-per-task", type=int)
    r.add_argument("--tasks", type=int, help="slurm: array size")
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(func=cmd_run)
    s = cs.add_parser("status", help="trials done per cell")
    s.add_argument("store", type=Path)
    s.set_defaults(func=cmd_status)
    rep = cs.add_parser("report", help="failure rates, intervals, tests against the baseline")
    rep.add_argument("store", type=Path)
    rep.add_argument("--json", action="store_true")
    rep.add_argument("--baseline", help="cell label to compare against (default: the profile's)")
    rep.set_defaults(func=cmd_report)


def _progress(store: Store, total: int, enabled: bool):  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    prog = Progress(TextColumn("trials"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), disable=not enabled)
    task = prog.add_task("trials", total=total)
    base = _done(store)

    def tick() -> None:
        prog.update(task, completed=min(total, _done(store) - base))

    return prog, tick


def _done(store: Store) -> int:
    return store.con.execute("SELECT count(*) FROM trials").fetchone()[0]


def cmd_run(args: argparse.Namespace) -> int:
    from tracer.campaign.executors import LocalExecutor, plan_chunks
    from tracer.store.rundir import environment

    spec = load_campaign(args.profile)
    check_run_options(workers=args.workers, tasks=args.tasks, time_min=args.time_min, gpus_per_task=args.gpus_per_task)
    executor = args.executor or spec.data["executor"]["kind"]
    if executor not in EXECUTORS:
        raise unknown("executor", executor, EXECUTORS)
    path = args.store or Path("runs") / f"{spec.name}.campaign.sqlite"
    store = Store.open(path, create=True, exclusive=True)
    store.init(spec, environment())
    remaining = sum(len(t) for _, t in plan_chunks(store, spec))
    print(f"campaign {spec.name}: {len(spec.cells())} cells x {spec.data['trials_per_cell']} trials, "
          f"{remaining} to run, store {path}", file=sys.stderr)
    prog, tick = _progress(store, remaining, not args.no_progress and sys.stderr.isatty())
    with prog:
        if executor == "local":
            events = LocalExecutor(store, spec, str(spec.path), args.workers).run(tick)
        else:
            from tracer.campaign.slurm import run_slurm

            events = run_slurm(store, spec, str(spec.path), path.parent / f"{path.stem}-slurm", partition=args.partition,
                               time_min=args.time_min, gpus_per_task=args.gpus_per_task, tasks=args.tasks)
    for e in events:
        print(f"tracer: crash recorded: {e[:300]}", file=sys.stderr)
    return cmd_report(argparse.Namespace(store=path, json=False, baseline=None))


def cmd_status(args: argparse.Namespace) -> int:
    store = Store.open(args.store, readonly=True)
    print(f"campaign {store.meta('name')} in {args.store}")
    for c in store.summary():
        print(f"  {c.label:<28} {c.done:>6}/{c.target:<6} failures {c.failures:<5} crashed {c.crashed:<4} gpus {c.gpus or '-'}")
    crashes = store.crashes()
    if crashes:
        print(f"  {len(crashes)} crash(es) recorded (see `campaign report`)")
    return 0


def report_data(store: Store, baseline: str | None) -> dict:
    profile = json.loads(store.meta("profile") or "{}")
    summary = store.summary()
    check_baseline(baseline, [c.label for c in summary])
    cells = [c.stats for c in summary if c.done]
    base = baseline or profile.get("baseline") or None
    if base and any(c.label == base for c in cells):
        cells = compare_to_baseline(cells, base)
    by_label = {c.label: c for c in cells}
    sp = profile.get("sprt", {})
    rows = []
    for c in summary:
        st = by_label.get(c.label)
        row = {"cell": c.label, "key": c.key, "trials": c.done, "target": c.target, "failures": c.failures,
               "crashed": c.crashed, "gpus": c.gpus, "first_failures": store.first_failures(c.cell_id)}
        if st is not None:
            row |= {"rate": st.rate, "ci95": [st.lower, st.upper], "one_sided": st.one_sided,
                    "p_vs_baseline": st.p_vs_baseline, "p_holm": st.p_holm}
            if sp.get("p0") and sp.get("p1"):
                row["sprt"] = sprt(c.failures, c.done, sp["p0"], sp["p1"]).value
        rows.append(row)
    env = json.loads(store.meta("environment") or "{}")
    return {"campaign": store.meta("name"), "baseline": base, "cells": rows, "crashes": store.crashes(),
            "trials_needed": {"1%": trials_needed(0.01), "0.1%": trials_needed(0.001)},
            "environment": env, "gpu": (env.get("gpu") or {}).get("name")}


def format_report(d: dict) -> str:
    lines = [f"campaign {d['campaign']} (baseline {d['baseline'] or '-'}) on {d['gpu'] or 'cpu'}",
             f"{'cell':<28} {'fail/trials':>12} {'rate':>8} {'95% interval':>22} {'p fewer than base (Holm)':>25}"]
    for r in d["cells"]:
        if "rate" not in r:
            lines.append(f"{r['cell']:<28} {'no trials yet':>12}")
            continue
        lo, hi = r["ci95"]
        ci = f"[0, {hi:.4f}] one-sided" if r["one_sided"] else f"[{lo:.4f}, {hi:.4f}]"
        p = f"{r['p_vs_baseline']:.3g} ({r['p_holm']:.3g})" if r.get("p_holm") is not None else "-"
        lines.append(f"{r['cell']:<28} {r['failures']:>5}/{r['trials']:<6} {r['rate']:>8.4f} {ci:>22} {p:>25}"
                     + (f"  sprt: {r['sprt']}" if "sprt" in r else "") + (f"  crashed {r['crashed']}" if r["crashed"] else ""))
    if d["baseline"]:
        lines.append(f"p: one-sided Fisher exact test that the cell fails less often than {d['baseline']} (near 1 when it fails "
                     "as often or more), Holm-adjusted over the cells.")
    n1, n01 = d["trials_needed"]["1%"], d["trials_needed"]["0.1%"]
    lines.append(f"what 0 failures proves: an upper bound of about 3/N; claiming a rate below 1% needs {n1} "
                 f"failure-free trials, below 0.1% needs {n01}.")
    lines.append("These trials speak for this GPU, driver and build only: a variant with 0 failures here may still fail "
                 "on another GPU family (the motivating failure was seen on GPUs with 170-188 SMs).")
    for c in d["crashes"]:
        lines.append(f"crash: {c['cell']} trials {c['trials'][:3]}{'...' if len(c['trials']) > 3 else ''} "
                     f"exit {c['exit_code']} on {c['gpu']}: {str(c['detail'])[:160]}")
    return "\n".join(lines)


def cmd_report(args: argparse.Namespace) -> int:
    d = report_data(Store.open(args.store, readonly=True), args.baseline)
    print(json.dumps(d, indent=1, default=str) if args.json else format_report(d))
    return 0
