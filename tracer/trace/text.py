"""The text a person reads after `trace analyze`: UNORDERED pairs first, then one line per other
verdict, then the streams; about a screen long whatever the trace's size (`--json` lists more)."""
from __future__ import annotations

from tracer.trace.analyze import Analysis, PairVerdict, StreamStats
from tracer.trace.model import OP_KINDS, OpKind, Trace
from tracer.trace.ordering import Edge, Verdict
from tracer.trace.pairs import PairMode, PairSpec

SHOWN_UNORDERED = 15
SHOWN_STREAMS = 10
ORDER = (Verdict.UNORDERED, *(v for v in Verdict if v is not Verdict.UNORDERED))  # what matters first


def edge_text(edge: Edge | None) -> str:
    """What orders a pair, in words (never a dict)."""
    if edge is None:
        return "nothing orders them"
    kind = getattr(edge.kind, "value", edge.kind)
    if kind == "stream-order":
        return "stream order"
    if kind == "event":
        return (f"event recorded on stream {edge.record_stream} (corr {edge.record_corr}), "
                f"waited on stream {edge.wait_stream} (corr {edge.wait_corr})")
    if kind == "host-sync":
        return f"host synchronisation ({edge.api or 'unknown API'})"
    return str(kind)


def pair_spec_text(spec: PairSpec) -> str:
    """A pair spec for people: 'all kernel pairs', 'none', or 'P -> C, ...'."""
    return {PairMode.ALL: "all kernel pairs", PairMode.NONE: "none (give --pairs)"}.get(spec.mode, str(spec))


def counts_text(counts: dict[str, int]) -> str:
    """'4 UNORDERED, 20 same-stream, 0 event-ordered, 0 host-synchronized', most serious first."""
    return ", ".join(f"{counts[v.value]} {v.value.upper() if v is Verdict.UNORDERED else v.value}"
                     for v in ORDER if v.value in counts)


def pair_line(p: PairVerdict) -> str:
    return (f"{p.producer} [stream {p.producer_stream}] -> {p.consumer} [stream {p.consumer_stream}], "
            f"gap {p.gap_ns / 1e3:.1f} us")


def stream_lines(streams: tuple[StreamStats, ...]) -> list[str]:
    lines = [f"  {'device':>6} {'stream':>8} {'ops':>8} {'busy ms':>10} {'idle ms':>10} {'max gap ms':>11}"]
    for s in streams[:SHOWN_STREAMS]:
        lines.append(f"  {s.device:>6} {s.stream:>8} {s.operations:>8} {s.busy_ns / 1e6:>10.3f} {s.idle_ns / 1e6:>10.3f} "
                     f"{s.max_gap_ns / 1e6:>11.3f}")
    if len(streams) > SHOWN_STREAMS:
        lines.append(f"  ... {len(streams) - SHOWN_STREAMS} more streams (--json lists all)")
    return lines


def verdict_lines(a: Analysis) -> list[str]:
    unordered = [p for p in a.pairs if p.verdict is Verdict.UNORDERED]  # for `all`, the listed ones
    lines = [f"UNORDERED: {a.unordered} pair(s)" + (" (nothing orders the consumer after its producer)" if a.unordered else "")]
    lines += [f"  {pair_line(p)}" for p in unordered[:SHOWN_UNORDERED]]
    if a.unordered > SHOWN_UNORDERED:
        lines.append(f"  ... {a.unordered - SHOWN_UNORDERED} more (--json lists up to 200)")
    for v in ORDER[1:]:
        first = next((p for p in a.pairs if p.verdict is v), None)
        example = f"; e.g. {pair_line(first)} by {edge_text(first.edge)}" if first else ""
        lines.append(f"{v.value}: {a.pair_counts.get(v.value, 0)}{example}")
    return lines


def operations_text(t: Trace) -> str:
    """'274 GPU operations (241 kernels, 14 memcpy, 19 memset)', or 'N kernels' when there is nothing else."""
    kinds = t.kernels.kinds()
    n = {kind: int((kinds == i).sum()) for i, kind in enumerate(OP_KINDS)}
    if n[OpKind.KERNEL] == len(t.kernels):
        return f"{len(t.kernels)} kernels"
    return (f"{len(t.kernels)} GPU operations ({n[OpKind.KERNEL]} kernels, {n[OpKind.MEMCPY]} memcpy, "
            f"{n[OpKind.MEMSET]} memset)")


def format_analysis(a: Analysis) -> str:
    t = a.trace
    lines = [f"{t.source}: {t.producer}",
             f"pairs ({pair_spec_text(a.pair_spec)}): {counts_text(a.pair_counts)}",
             *verdict_lines(a),
             f"{operations_text(t)} on {len(a.streams)} stream(s), {len(t.ranges.start)} NVTX ranges, "
             f"{a.attribution.unattributed} operations unattributed ({a.attribution.no_launch_record} without a launch "
             f"record), {len(t.records)} event records, {a.event_edges} event edges, {a.unmatched_waits} waits on "
             "unknown records",
             *stream_lines(a.streams),
             *a.report_lines()]
    return "\n".join(lines)
