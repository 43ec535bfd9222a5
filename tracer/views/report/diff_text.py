"""`tracer diff` as text: what changed first (verdicts, then time beyond noise), then what did not."""
from __future__ import annotations

from tracer.compare.result import Diff
from tracer.compare.timing import Change, TimeChange
from tracer.compare.verdicts import KeyedCount, Status

SHOWN = 15


def _ns(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.0f} ns"


def _cut(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def time_line(t: TimeChange) -> str:
    what = f"{t.kind.value} {_cut(t.name)}"
    if t.change in (Change.NEW, Change.GONE):
        n, med = (t.n_b, t.median_b_ns) if t.change is Change.NEW else (t.n_a, t.median_a_ns)
        return f"  {t.change.value:<12} {what}: {n} x, median {_ns(med)}"
    ci = f", 95% CI x{t.ci_low:.3f}..x{t.ci_high:.3f}, p={t.p_holm:.2g}" if t.ci_low is not None and t.p_holm is not None else ""
    pct = f"{t.percent:+.1f}%" if t.percent is not None else "n/a"
    return (f"  {t.change.value:<12} {what}: {pct} (median {_ns(t.median_a_ns)} -> {_ns(t.median_b_ns)}, "
            f"n {t.n_a} -> {t.n_b}{ci})")


def keyed_line(r: KeyedCount) -> str:
    k = r.key
    if len(k) == 4:  # a pair: producer, consumer, kernels
        return (f"  {r.status.value:<10} {k[0]} [{_cut(k[2], 40)}] -> {k[1]} [{_cut(k[3], 40)}]: "
                f"{r.detail_a or '-'} -> {r.detail_b or '-'} ({r.a} -> {r.b})")
    if len(k) == 6:  # a hazard
        return (f"  {r.status.value:<10} {k[0]} {k[1]} [{_cut(k[2], 40)}] -> {k[3]} [{_cut(k[4], 40)}] on {k[5]} "
                f"({r.a} -> {r.b})")
    return f"  {r.status.value:<10} {k[1]} {k[2]} in {_cut(k[3], 50)} ({k[4] or 'no source'}) of {k[0]} ({r.a} -> {r.b})"


def _section(title: str, rows: list[str], total: int) -> list[str]:
    if not rows:
        return []
    more = [f"  ... {total - SHOWN} more (--json lists all)"] if total > SHOWN else []
    return [title] + rows[:SHOWN] + more


def format_diff(d: Diff) -> str:
    lines = [f"diff ({d.kind.value}): A {d.a.path} ({d.a.size}) -> B {d.b.path} ({d.b.size})"]
    lines += [f"warning: {n} is incomplete: {note}" for n, s in (("A", d.a), ("B", d.b)) if not s.complete
              for note in (s.notes or ("partial",))]
    if d.no_change:
        lines.append("no change: " + ("the same input on both sides" if d.same_input else
                                      "no verdict moved, no time changed beyond run-to-run noise, no median moved "
                                      "where there were too few instances to judge"))
    lines.append(f"matched: {d.matching}")
    if d.hazards is not None:
        h = d.hazards
        changed = [r for r in h.rows if r.status is not Status.UNCHANGED]
        lines.append(f"hazards: {h.found_a} -> {h.found_b}" + ("" if h.checked else " (not judged on both sides)"))
        lines += _section("hazards new and gone:", [keyed_line(r) for r in changed], len(changed))
        lines += [f"note: {n}" for n in h.notes]
    if d.pairs is not None:
        changed = list(d.changed_pairs)
        if d.pair_counts:
            ua, ub = (c.get("unordered", 0) for c in d.pair_counts)
            lines.append(f"unordered pairs: {ua} -> {ub}")
        lines += _section("pairs whose ordering changed, new or gone:", [keyed_line(r) for r in changed], len(changed))
    if d.findings is not None:
        f = d.findings.to_json()
        lines.append(f"sanitizer findings: {f['new']} new, {f['fixed']} fixed, {f['unchanged']} unchanged")
        changed = [r for r in d.findings.rows if r.status is not Status.UNCHANGED]
        lines += _section("findings new and fixed:", [keyed_line(r) for r in changed], len(changed))
    for c in d.cells or ():
        rate = " -> ".join("-" if s is None else f"{s.failures}/{s.trials} [{s.lower:.3f}, {s.upper:.3f}]" for s in (c.a, c.b))
        p = f", Fisher p={c.p_value:.2g}" if c.p_value is not None else ""
        lines.append(f"  {c.status.value:<10} cell {c.label}: {rate}{p}")
    changed_t = list(d.changed_timing)
    lines += _section("time (beyond noise, new, gone):", [time_line(t) for t in changed_t], len(changed_t))
    moved = sorted((t for t in d.timing if t.change is Change.UNJUDGED and t.median_a_ns != t.median_b_ns),
                   key=lambda t: -abs(t.percent or 0.0))
    lines += _section("time moved, not judged (fewer than 3 instances on a side):", [time_line(t) for t in moved], len(moved))
    rest = [t for t in d.timing if t not in changed_t]
    if d.timing:
        noise = sum(t.change is Change.WITHIN_NOISE for t in rest)
        unjudged = sum(t.change is Change.UNJUDGED for t in rest)
        lines.append(f"time: {len(changed_t)} changed, {noise} within noise, {unjudged} unjudged "
                     f"(fewer than 3 instances on a side)")
    lines += [f"note: {n}" for n in d.notes]
    return "\n".join(lines)
