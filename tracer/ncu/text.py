"""Plain-text tables of profiled launches and comparisons (the command prints them)."""
from __future__ import annotations

from tracer.ncu.compare import Comparison, Delta, Summary
from tracer.ncu.records import MEMBAR, Launch
from tracer.ncu.profile_json import ProfileRun
from tracer.textsafe import lines_text

SHOWN = 40


def _f(value: float | None, fmt: str) -> str:
    return "?" if value is None else format(value, fmt)


def _dim(d: tuple[int, int, int] | None) -> str:
    return "?" if d is None else "x".join(str(v) for v in d)


def top_stall(shares: dict[str, float]) -> str:
    if not shares:
        return "?"
    r = max(sorted(shares), key=lambda k: shares[k])
    return f"{r} {100 * shares[r]:.0f}%"


def clock_line(clock_control: str | None) -> str:
    meaning = {"none": "not locked: the GPU ran at its own (boost) clocks, as unprofiled code does",
               "base": "locked to base clocks by ncu: durations are longer than unprofiled ones"}
    if clock_control is None:
        return "clock control: unknown (the input does not say)"
    return f"clock control: {clock_control} ({meaning.get(clock_control, 'as ncu was told')})"


def format_launch(x: Launch) -> str:
    shares = x.shares()
    membar = shares.get(MEMBAR) if shares else None
    nvtx = x.nvtx_leaf or "-"
    return (f"  {x.id:>4} {x.name[:34]:<34} {nvtx[:28]:<28} {_dim(x.grid):>11} {_dim(x.block):>9} "
            f"{_f(None if x.duration_ns is None else x.duration_ns / 1e3, '.2f'):>9} {_f(x.dram_pct, '.1f'):>6} "
            f"{_f(x.l2_pct, '.1f'):>6} {_f(x.occupancy_pct, '.1f'):>6} {_f(x.ipc, '.2f'):>5} "
            f"{_f(None if membar is None else 100 * membar, '.1f'):>7}  {top_stall(shares)}")


def format_run(run: ProfileRun) -> str:
    lines = [clock_line(run.clock_control)]
    head = (f"  {'id':>4} {'kernel':<34} {'NVTX range':<28} {'grid':>11} {'block':>9} {'us':>9} {'DRAM%':>6} "
            f"{'L2%':>6} {'occ%':>6} {'IPC':>5} {'membar%':>7}  top stall")
    for t in run.targets:
        r = t.report
        made = f", made by ncu {r.ncu_version}" if r.ncu_version else ""
        lines.append(f"{t.label}: {len(r.launches)} launches ({r.source.value}{made}) from {r.path}")
        lines += [f"  note: {n}" for n in r.notes]
        lines.append(head)
        lines += [format_launch(x) for x in r.launches[:SHOWN]]
        if len(r.launches) > SHOWN:
            lines.append(f"  ... {len(r.launches) - SHOWN} more (--json lists all)")
        missing = sorted({m for x in r.launches for m in x.missing})
        if missing:
            lines.append("  not in the report (shown as ?): " + ", ".join(missing))
    return lines_text(lines)


def _summary_row(s: Summary) -> str:
    mb = s.membar_share
    return (f"  {s.group[:28]:<28} {s.launches:>4} {_f(None if s.duration_ns is None else s.duration_ns / 1e3, '.2f'):>9} "
            f"{_f(s.dram_pct, '.1f'):>6} {_f(s.l2_pct, '.1f'):>6} {_f(s.occupancy_pct, '.1f'):>6} {_f(s.ipc, '.2f'):>5} "
            f"{_f(None if mb is None else 100 * mb, '.2f'):>8}  {top_stall(dict(s.shares))}")


def _delta_row(d: Delta) -> str:
    grew = f"{d.grew_most} {d.grew_by:+.2f}" if d.grew_most is not None and d.grew_by is not None else "nothing"
    return (f"  {d.group[:28]:<28} {_f(d.duration_pct, '+.1f'):>8}% {_f(d.dram_pts, '+.1f'):>7} {_f(d.l2_pts, '+.1f'):>7} "
            f"{_f(d.occupancy_pts, '+.1f'):>7} {_f(d.ipc, '+.2f'):>6} {_f(d.membar_share_pts, '+.2f'):>9}  {grew}")


def format_comparison(c: Comparison) -> str:
    lines = [clock_line(c.clock_control), "medians per group:",
             f"  {'group':<28} {'n':>4} {'us':>9} {'DRAM%':>6} {'L2%':>6} {'occ%':>6} {'IPC':>5} {'membar%':>8}  top stall"]
    lines += [_summary_row(s) for s in c.summaries]
    if c.deltas:
        lines += [f"against {c.baseline} (points of peak / of all stalls; the stall reason whose warp cycles per "
                  f"issued instruction grew most):",
                  f"  {'group':<28} {'duration':>9} {'DRAM':>7} {'L2':>7} {'occ':>7} {'IPC':>6} {'membar':>9}  grew most"]
        lines += [_delta_row(d) for d in c.deltas]
    lines += [f"note: {n}" for n in c.notes]
    return lines_text(lines)


def format_pair(c: Comparison, a: str, b: str) -> str:
    """Two groups in two columns, one metric a row, with B - A."""
    sa, sb = c.summary(a), c.summary(b)
    rows = [("duration us", "duration_ns", 1e-3, ".2f"), ("DRAM % of peak", "dram_pct", 1, ".1f"),
            ("L2 % of peak", "l2_pct", 1, ".1f"), ("achieved occupancy %", "occupancy_pct", 1, ".1f"),
            ("issued IPC", "ipc", 1, ".2f"), ("warp cycles per issue", "cycles_per_issue", 1, ".2f")]
    lines = [f"  {'':<24} {a[:22]:>22} {b[:22]:>22} {'B - A':>10}"]
    for title, attr, k, fmt in rows:
        va, vb = getattr(sa, attr), getattr(sb, attr)
        va, vb = (None if va is None else va * k), (None if vb is None else vb * k)
        lines.append(f"  {title:<24} {_f(va, fmt):>22} {_f(vb, fmt):>22} {_f(None if va is None or vb is None else vb - va, '+' + fmt):>10}")
    shares_a, shares_b = dict(sa.shares), dict(sb.shares)
    ranked = sorted(set(shares_a) | set(shares_b), key=lambda r: (-max(shares_a.get(r, 0), shares_b.get(r, 0)), r))[:8]
    for r in ranked + ([MEMBAR] if MEMBAR not in ranked and (MEMBAR in shares_a or MEMBAR in shares_b) else []):
        va, vb = 100 * shares_a.get(r, 0.0), 100 * shares_b.get(r, 0.0)
        lines.append(f"  {'stall ' + r + ' %':<24} {va:>22.2f} {vb:>22.2f} {vb - va:>+10.2f}")
    return lines_text(lines)
