"""What a campaign store says: the report's data (the `campaign report --json` contract) and its
text, and the status lines; read from the store, never written to it."""
from __future__ import annotations

import sys
from typing import Any

from tracer.campaign.stats import check_baseline, compare_to_baseline, sprt, trials_needed
from tracer.campaign.trials_db import CellSummary, Store
from tracer.textsafe import lines_text


def _row(store: Store, c: CellSummary, stats_by_label: dict[str, Any], sprt_bounds: dict[str, float]) -> dict[str, Any]:
    row: dict[str, Any] = {"cell": c.label, "key": c.key, "trials": c.done, "target": c.target, "failures": c.failures,
                           "crashed": c.crashed, "gpus": c.gpus, "first_failures": store.first_failures(c.cell_id)}
    st = stats_by_label.get(c.label)
    if st is not None:
        row |= {"rate": st.rate, "ci95": [st.lower, st.upper], "one_sided": st.one_sided,
                "p_vs_baseline": st.p_vs_baseline, "p_holm": st.p_holm}
        if sprt_bounds.get("p0") and sprt_bounds.get("p1"):
            row["sprt"] = sprt(c.failures, c.done, sprt_bounds["p0"], sprt_bounds["p1"]).value
    return row


def report_data(store: Store, baseline: str | None) -> dict[str, Any]:
    profile = store.meta_json("profile")
    summary = store.summary()
    check_baseline(baseline, [c.label for c in summary])
    cells = [c.stats for c in summary if c.stats is not None]
    base = baseline or profile.get("baseline") or None
    if base and any(c.label == base for c in cells):
        cells = compare_to_baseline(cells, base)
    by_label = {c.label: c for c in cells}
    rows = [_row(store, c, by_label, profile.get("sprt", {})) for c in summary]
    env = store.meta_json("environment")
    return {"schema": 1, "kind": "campaign-report", "campaign": store.meta("name"), "baseline": base, "cells": rows, "crashes": store.crashes(),
            "trials_needed": {"1%": trials_needed(0.01), "0.1%": trials_needed(0.001)},
            "environment": env, "gpu": (env.get("gpu") or {}).get("name")}


def _cell_line(r: dict[str, Any]) -> str:
    if "rate" not in r:
        return f"{r['cell']:<28} {'no trials':>12}"
    lo, hi = r["ci95"]
    ci = f"[0, {hi:.4f}] one-sided" if r["one_sided"] else f"[{lo:.4f}, {hi:.4f}]"
    p = f"{r['p_vs_baseline']:.3g} ({r['p_holm']:.3g})" if r.get("p_holm") is not None else "-"
    return (f"{r['cell']:<28} {r['failures']:>5}/{r['trials']:<6} {r['rate']:>8.4f} {ci:>22} {p:>25}"
            + (f"  sprt: {r['sprt']}" if "sprt" in r else "") + (f"  crashed {r['crashed']}" if r["crashed"] else ""))


def format_report(d: dict[str, Any]) -> str:
    lines = [f"campaign {d['campaign']} (baseline {d['baseline'] or '-'}) on {d['gpu'] or 'cpu'}",
             f"{'cell':<28} {'fail/trials':>12} {'rate':>8} {'95% interval':>22} {'p fewer than base (Holm)':>25}"]
    lines += [_cell_line(r) for r in d["cells"]]
    if d["baseline"]:
        lines.append(f"p: one-sided Fisher exact test that the cell fails less often than {d['baseline']} (near 1 when it fails "
                     "as often or more), Holm-adjusted over the cells.")
    n1, n01 = d["trials_needed"]["1%"], d["trials_needed"]["0.1%"]
    lines.append(f"what 0 failures proves: an upper bound of about 3/N; claiming a rate below 1% needs {n1} "
                 f"failure-free trials, below 0.1% needs {n01}.")
    lines.append("These trials speak for this GPU, driver and build only: a variant with 0 failures here may still fail "
                 "on another GPU family (the motivating failure was seen on GPUs with 170-188 SMs).")
    for c in d["crashes"]:
        trials = ", ".join(str(t) for t in c["trials"][:3]) + (", ..." if len(c["trials"]) > 3 else "")
        lines.append(f"crash: {c['cell']} trials {trials} "
                     f"exit {c['exit_code']} on {c['gpu']}: {str(c['detail'])[:160]}")
    return lines_text(lines)


def format_status(store: Store) -> str:
    lines = [f"campaign {store.meta('name')} in {store.path}"]
    for c in store.summary():
        lines.append(f"  {c.label:<28} {c.done:>6}/{c.target:<6} failures {c.failures:<5} crashed {c.crashed:<4} gpus {c.gpus or '-'}")
    crashes = store.crashes()
    if crashes:
        lines.append(f"  {len(crashes)} crash(es) recorded (see `campaign report`)")
    return lines_text(lines)


def progress(store: Store, total: int, enabled: bool):  # type: ignore[no-untyped-def]  # returns rich's Progress and a tick; rich is imported inside (start-up)
    """A rich progress bar over the trials stored since it started, and the tick that updates it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    raw = getattr(sys.stdout, "inner", sys.stdout)  # its own cursor codes go to the terminal as they are
    bar = Progress(TextColumn("trials"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), disable=not enabled,
                   console=Console(file=raw))
    task = bar.add_task("trials", total=total)
    base = store.trial_count()

    def tick() -> None:
        bar.update(task, completed=min(total, store.trial_count() - base))

    return bar, tick
