"""tracer against HolisticTraceAnalysis on the same PyTorch profiler (Kineto) traces: per rank the
communication/computation overlap, per stream the idle time and its host-wait part, side by side.

HTA (pip install HolisticTraceAnalysis) reads a folder of per-rank traces; each trace given here is
copied into a folder of its own. tracer's numbers come from `tracer.analysis.explain` (overlap over the
whole run, every step pooled) and `trace analyze`'s stream statistics; HTA's host wait (the kernel's
runtime call started after the previous kernel on the stream ended) is tracer's idle time whose
next kernel was launched after the gap began (host-sync, blocking-copy, host-api, late-launch).
Operations are kernels, copies and memsets on both sides (HTA's idle breakdown counts all three);
HTA is also run with HTA_DISABLE_NS_ROUNDING=1 (its parser otherwise rounds starts up and ends down
to whole microseconds), and its idle sum is recomputed on tracer's operations (hta_formula) to show
where the two definitions part.
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


def hta_numbers(path: Path, rounding: bool = True) -> dict:
    """HTA's figures; `rounding` False sets HTA_DISABLE_NS_ROUNDING=1, HTA's own switch that keeps
    the fractions of a microsecond its parser otherwise cuts (start rounded up, end down)."""
    import os

    from hta.trace_analysis import TraceAnalysis

    rank = rank_of(path)
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "0" if rounding else "1"
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
    """The trace's GPU operations (kernels, copies, memsets) cut to those HTA keeps by default
    (include_last_profiler_step=False): launched before the last ProfilerStep began (operations
    without a launch record are dropped too)."""
    from dataclasses import fields, replace

    from tracer.analysis.attribution import join_launches
    from tracer.model.trace import with_operations

    trace = with_operations(trace)
    r = trace.ranges
    steps = [i for i, sid in enumerate(r.text.tolist()) if trace.strings[int(sid)].startswith("ProfilerStep")]
    if len(steps) < 2:
        return trace
    last = int(r.start[steps].max())
    _, launch = join_launches(trace)
    keep = (launch >= 0) & (launch < last)
    k = trace.kernels
    cut = {f.name: getattr(k, f.name)[keep] for f in fields(k) if getattr(k, f.name) is not None}
    return replace(trace, kernels=replace(k, **cut))


def tracer_numbers(path: Path) -> dict:
    import numpy as np

    from tracer.artifact import open_artifact
    from tracer.analysis.analyze import analyze
    from tracer.analysis.explain import idle_gaps, overlap
    from tracer.analysis.job_summary import collective_mask
    from tracer.analysis.pairs import PairSpec

    a = analyze(hta_window(open_artifact(path).load()), PairSpec.from_json("none"), hazards=False)
    k = a.trace.kernels
    found = overlap(a.trace, collective_mask(a.trace), ([], np.full(len(k), -1)))  # one row: no steps, one device
    groups, _ = idle_gaps(a)
    streams = {s.stream: {"idle_us": s.idle_ns / 1e3, "host_wait_us": 0.0, "hta_formula_us": hta_formula(k, s.stream) / 1e3}
               for s in a.streams}
    for g in groups:
        if g.cause.value in HOST_SIDE:
            streams[g.stream]["host_wait_us"] += g.total_ns / 1e3
    return {"overlap_pct": 100.0 * found[0].hidden_ns / found[0].comm_ns if found else None, "streams": streams}


def hta_formula(k, stream: int) -> int:
    """HTA's idle sum on tracer's operations: start minus the previous operation's end, in start
    order, negative terms included (tracer's idle is start minus the running maximum of the ends,
    never negative: operations that overlap on a stream make HTA's total smaller)."""
    import numpy as np

    sel = np.flatnonzero(k.stream == stream)
    o = sel[np.argsort(k.start[sel], kind="stable")]
    return int((k.start[o][1:] - k.end[o][:-1]).sum())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", type=Path, nargs="+")
    ap.add_argument("--json")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    out = {}
    for path in args.traces:
        h, e, t = hta_numbers(path), hta_numbers(path, rounding=False), tracer_numbers(path)
        out[path.name] = {"hta": h, "hta_unrounded": e, "tracer": t}
        def pct(x: float | None) -> str:  # x != x: NaN, HTA's figure without communication
            return "none" if x is None or x != x else f"{x:.2f}%"
        print(f"{path.name} (rank {h['rank']}): comm/comp overlap HTA {pct(h['overlap_pct'])} (unrounded "
              f"{pct(e['overlap_pct'])}) tracer {pct(t['overlap_pct'])}")
        for s in sorted(set(h["streams"]) | set(t["streams"])):
            hs, es, ts = h["streams"].get(s), e["streams"].get(s), t["streams"].get(s)

            def cell(x: dict | None, key: str) -> str:
                return f"{x[key]:12.1f}" if x else f"{'(none)':>12}"

            def off(x: dict | None, key: str, ts: dict | None = ts) -> str:
                return f"{100 * (ts[key] / x[key] - 1):+.3f}%" if x and ts and x[key] else "-"

            print(f"  stream {s:>3}: idle us HTA {cell(hs, 'idle_us')} unrounded {cell(es, 'idle_us')} tracer "
                  f"{cell(ts, 'idle_us')} ({off(hs, 'idle_us')} / {off(es, 'idle_us')}; HTA's sum on tracer's operations "
                  f"{cell(ts, 'hta_formula_us')}); host wait HTA "
                  f"{cell(hs, 'host_wait_us')} unrounded {cell(es, 'host_wait_us')} tracer {cell(ts, 'host_wait_us')} "
                  f"({off(hs, 'host_wait_us')} / {off(es, 'host_wait_us')})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
