"""The text a person reads after `trace analyze`: UNORDERED pairs first, then one line per other
verdict, then the streams; about a screen long whatever the trace's size (`--json` lists more)."""
from __future__ import annotations

from collections import Counter

from tracer.textsafe import lines_text
from tracer.analysis.analyze import Analysis, PairVerdict, StreamStats
from tracer.model.trace import OP_KINDS, OpKind, Trace, raw_id
from tracer.model.names import ellipsize
from tracer.analysis.ordering import Edge, Verdict
from tracer.analysis.pairs import PairMode, PairSpec

SHOWN_UNORDERED = 15
SHOWN_STREAMS = 10
ORDER = (Verdict.UNORDERED, *(v for v in Verdict if v is not Verdict.UNORDERED))  # what matters first


def edge_text(edge: Edge | None, trace: Trace | None = None) -> str:
    """What orders a pair, in words (never a dict); with the trace, streams named by process too."""
    if edge is None:
        return "nothing orders them"
    kind = getattr(edge.kind, "value", edge.kind)
    if kind == "stream-order":
        return "stream order"
    if kind == "event":
        return (f"event recorded on {stream_text(edge.record_stream, trace)} (corr {raw(edge.record_corr)}), "
                f"waited on {stream_text(edge.wait_stream, trace)} (corr {raw(edge.wait_corr)})")
    if kind == "host-sync":
        return f"host synchronisation ({edge.api or 'unknown API'})"
    return str(kind)


def stream_text(key: int | None, trace: Trace | None) -> str:
    """`stream 7`, or `pid 1234 stream 7` in a trace of several processes."""
    return f"stream {key}" if trace is None or key is None else trace.stream_label(key)


def raw(corr: int | None) -> int | None:
    return None if corr is None else raw_id(corr)


def pair_spec_text(spec: PairSpec) -> str:
    """A pair spec for people: 'all kernel pairs', 'none', or 'P -> C, ...'."""
    return {PairMode.ALL: "all kernel pairs", PairMode.NONE: "none (give --pairs)"}.get(spec.mode, str(spec))


def counts_text(counts: dict[str, int]) -> str:
    """'4 UNORDERED, 20 same-stream, 0 event-ordered, 0 host-synchronized', most serious first."""
    return ", ".join(f"{counts[v.value]} {v.value.upper() if v is Verdict.UNORDERED else v.value}"
                     for v in ORDER if v.value in counts)


def pair_line(p: PairVerdict, trace: Trace | None = None) -> str:
    return (f"{ellipsize(p.producer, 80)} [{stream_text(p.producer_stream, trace)}] -> {ellipsize(p.consumer, 80)} "
            f"[{stream_text(p.consumer_stream, trace)}], "
            f"gap {p.gap_ns / 1e3:.1f} us")


def stream_lines(streams: tuple[StreamStats, ...]) -> list[str]:
    several = any(s.raw_stream is not None for s in streams)
    lines = [f"  {'device':>6} {'pid':>8}" * several + f"  {'device':>6}" * (not several) +
             f" {'stream':>8} {'ops':>8} {'busy ms':>10} {'idle ms':>10} {'max gap ms':>11}"]
    for s in streams[:SHOWN_STREAMS]:
        who = f"{s.device:>6} {s.pid:>8}" if several else f"{s.device:>6}"
        raw = s.stream if s.raw_stream is None else s.raw_stream
        lines.append(f"  {who} {raw:>8} {s.operations:>8} {s.busy_ns / 1e6:>10.3f} {s.idle_ns / 1e6:>10.3f} "
                     f"{s.max_gap_ns / 1e6:>11.3f}")
    if len(streams) > SHOWN_STREAMS:
        lines.append(f"  ... {len(streams) - SHOWN_STREAMS} more streams (--json lists all)")
    return lines


def verdict_lines(a: Analysis) -> list[str]:
    unordered = [p for p in a.pairs if p.verdict is Verdict.UNORDERED]  # for `all`, the listed ones
    lines = [f"UNORDERED: {a.unordered} pair(s)" + (" (nothing orders the consumer after its producer)" if a.unordered else "")]
    lines += [f"  {pair_line(p, a.trace)}" for p in unordered[:SHOWN_UNORDERED]]
    if a.unordered > SHOWN_UNORDERED:
        lines.append(f"  ... {a.unordered - SHOWN_UNORDERED} more (--json lists up to 200)")
    for v in ORDER[1:]:
        first = next((p for p in a.pairs if p.verdict is v), None)
        example = f"; e.g. {pair_line(first, a.trace)} by {edge_text(first.edge, a.trace)}" if first else ""
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


def no_pairs_reason(a: Analysis) -> str:
    """Why `--pairs all` judged no pair: pairs are between streams of one device."""
    per_device = Counter(s.device for s in a.streams)
    if not per_device:
        return "the trace has no kernels"
    if max(per_device.values()) < 2:
        return (f"pairs are judged between streams of one device, and each of the {len(per_device)} device(s) here ran "
                "kernels on one stream only (nothing runs concurrently on a device to misorder)")
    return "no kernel has an earlier kernel on another stream of its device"


def pair_lines(a: Analysis) -> list[str]:
    """The pair verdicts; none when no pairs were asked for (hazards judge instead: a note says so)."""
    if a.pair_spec.mode is PairMode.NONE:
        return []
    head = f"pairs ({pair_spec_text(a.pair_spec)})"
    if a.pair_spec.mode is PairMode.ALL and not sum(a.pair_counts.values()):
        return [f"{head}: none to judge: {no_pairs_reason(a)}"]
    return [f"{head}: {counts_text(a.pair_counts)}", *verdict_lines(a)]


def unknown_waits_note(a: Analysis) -> list[str]:
    if not a.unmatched_waits:
        return []
    return [f"note: {a.unmatched_waits} stream wait(s) on an event whose record is not in the trace: they order nothing "
            "here, so a pair only they order shows as UNORDERED (an event never recorded while tracing, whose wait CUDA "
            "completes at once; or records the capture left out: nsys needs --cuda-event-trace=true)"]


def format_analysis(a: Analysis) -> str:
    t = a.trace
    hazards = a.hazards.text_lines() if a.hazards is not None else []
    lines = [f"{t.source}: {t.producer}",
             *pair_lines(a),
             *hazards,
             f"{operations_text(t)} on {len(a.streams)} stream(s)"
             + (f" of {len(t.processes)} processes (pids {', '.join(map(str, t.processes))})" if t.multi_process else "") + ", "
             f"{len(t.ranges.start)} NVTX ranges, "
             f"{a.attribution.unattributed} operations unattributed ({a.attribution.no_launch_record} without a launch "
             f"record), {len(t.records)} event records, {a.event_edges} event edges, {a.unmatched_waits} waits on "
             "unknown records",
             *stream_lines(a.streams),
             *a.report_lines(hazards=False),
             *unknown_waits_note(a)]
    return lines_text(lines)
