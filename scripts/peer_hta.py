"""tracer against HolisticTraceAnalysis on the same PyTorch profiler (Kineto) traces: per rank the
communication/computation overlap, per stream the idle time and its host-wait part, side by side.

HTA (pip install HolisticTraceAnalysis) reads a folder of per-rank traces; each trace given here is
copied into a folder of its own. tracer's numbers come from `tracer.analysis.explain` (overlap over the
whole run, every step pooled) and `trace analyze`'s stream statistics; HTA's host wait (the kernel's
runtime call started after the previous kernel on the stream ended) is tracer's idle time whose
next kernel was launched after the gap began (host-sync, blocking-copy, host-api, late-launch).
Usage: python scripts/peer_hta.py TRACE.json.gz [...] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import gzip
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOST_SIDE = ("host-sync", "blocking-copy", "host-api", "late-launch")


def rank_of(path: Path) -> int:
    with gzip.open(path) if path.suffix == ".gz" else open(path) as fh:
        return int(json.load(fh).get("distributedInfo", {}).get("rank", 0))


def hta_numbers(path: Path) -> dict:
    from hta.trace_analysis import TraceAnalysis

    rank = rank_of(path)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(path, Path(tmp) / path.name)
        t = TraceAnalysis(trace_dir=tmp)
        overlap = t.get_comm_comp_overlap(visualize=False)
        idle, _ = t.get_idle_time_breakdown(ranks=[rank], visualize=False)
    streams: dict[int, dict[str, float]] = {}
    for row in idle.itertuples():
        streams.setdefault(int(row.stream), {})[str(row.idle_category)] = float(row.idle_time)
    return {"rank": rank, "overlap_pct": float(overlap["comp_comm_overlap_pctg"].iloc[0]),
            "streams": {s: {"idle_us": sum(v.values()), "host_wait_us": v.get("host_wait", 0.0)} for s, v in streams.items()}}


def hta_window(trace):
    """The trace with only the kernels HTA keeps by default (include_last_profiler_step=False): those
    launched before the last ProfilerStep began (kernels without a launch record are dropped too)."""
    from dataclasses import replace


    from tracer.analysis.attribution import join_launches

    r = trace.ranges
    steps = [i for i, sid in enumerate(r.text.tolist()) if trace.strings[int(sid)].startswith("ProfilerStep")]
    if len(steps) < 2:
        return trace
    last = int(r.start[steps].max())
    _, launch = join_launches(trace)
    keep = (launch >= 0) & (launch < last)
    k = trace.kernels
    return replace(trace, kernels=replace(k, **{f: getattr(k, f)[keep] for f in ("start", "end", "device", "stream", "corr", "name")},
                                          graph_node=None if k.graph_node is None else k.graph_node[keep]))


def tracer_numbers(path: Path) -> dict:
    import numpy as np

    from tracer.artifact import open_artifact
    from tracer.analysis.analyze import analyze
    from tracer.analysis.explain import idle_gaps, overlap
    from tracer.analysis.job_summary import collective_mask
    from tracer.analysis.pairs import PairSpec

    a = analyze(hta_window(open_artifact(path).load()), PairSpec.from_json("none"), hazards=False)
    k = a.trace.kernels
    (o,) = overlap(a.trace, collective_mask(a.trace), ([], np.full(len(k), -1)))
    groups, _ = idle_gaps(a)
    streams = {s.stream: {"idle_us": s.idle_ns / 1e3, "host_wait_us": 0.0} for s in a.streams}
    for g in groups:
        if g.cause.value in HOST_SIDE:
            streams[g.stream]["host_wait_us"] += g.total_ns / 1e3
    return {"overlap_pct": 100.0 * o.hidden_ns / o.comm_ns, "streams": streams}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", type=Path, nargs="+")
    ap.add_argument("--json")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    out = {}
    for path in args.traces:
        h, t = hta_numbers(path), tracer_numbers(path)
        out[path.name] = {"hta": h, "tracer": t}
        print(f"{path.name} (rank {h['rank']}): comm/comp overlap HTA {h['overlap_pct']:.2f}% tracer {t['overlap_pct']:.2f}%")
        for s in sorted(set(h["streams"]) | set(t["streams"])):
            hs, ts = h["streams"].get(s), t["streams"].get(s)
            def cell(x: dict | None, key: str) -> str:
                return f"{x[key]:12.1f}" if x else f"{'(none)':>12}"
            ratio = (f"{ts['idle_us'] / hs['idle_us']:.4f}" if hs and ts and hs["idle_us"] else "-")
            print(f"  stream {s:>3}: idle us HTA {cell(hs, 'idle_us')} tracer {cell(ts, 'idle_us')} (x{ratio}); "
                  f"host wait HTA {cell(hs, 'host_wait_us')} tracer {cell(ts, 'host_wait_us')}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
