"""`tracer report` and `tracer demo`: the evidence on one self-contained HTML page."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tracer.errors import UsageError

DEMO_DIR = Path(__file__).resolve().parent.parent / "data" / "demo"
DEMO_PAIRS = [("*/cast_transpose", "*/dgrad"), ("*/cast_transpose", "*/wgrad")]


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="one self-contained HTML page from run directories and campaign stores")
    r.add_argument("sources", type=Path, nargs="+", help="trace run dirs, sanitize output dirs, campaign stores")
    r.add_argument("-o", "--output", type=Path, default=Path("report.html"))
    r.add_argument("--range", help="timeline: only NVTX ranges matching this regex")
    r.set_defaults(func=cmd_report)
    d = sub.add_parser("demo", help="the whole product on sample data captured on an H200 (no GPU needed)")
    d.add_argument("-o", "--output", type=Path, default=Path("tracer-demo"))
    d.set_defaults(func=cmd_demo)


def kind_of(path: Path) -> str:
    from tracer.evidence import is_campaign_store

    if path.is_dir() and (path / "trace.sqlite").is_file():
        return "trace"
    if path.is_dir() and (path / "report.json").is_file():
        return "sanitize"
    if is_campaign_store(path) or path.suffix == ".json" and "variants" in path.read_text()[:2000]:
        return "campaign"
    if path.suffix in (".sqlite", ".gz") or path.name.endswith(".json"):
        return "trace-file"
    raise UsageError(f"{path}: not a trace run directory, sanitize output, campaign store or trace file")


def build_report(sources: list[Path], title: str, timeline_range: str | None, pairs: list[tuple[str, str]] | None = None):  # type: ignore[no-untyped-def]
    from tracer.commands.trace import _pairs_for_source, pair_args
    from tracer.evidence import ablation_cells, sanitizer_runs
    from tracer.plots.ablation import draw_ablation
    from tracer.plots.report import Report
    from tracer.plots.timeline import draw_timeline
    from tracer.plots.verdicts import draw_verdicts
    from tracer.trace.analyze import MAX_LISTED_PAIRS, analyze, top_kernels
    from tracer.trace.load import load_trace
    from tracer.trace.timeline import timeline_data

    rep = Report(title)
    runs: list[dict] = []
    for src in sources:
        kind = kind_of(src)
        if kind in ("trace", "trace-file"):
            env = src / "environment.json"
            if env.is_file():
                rep.add_text(f"environment ({src.name})", json.dumps(json.loads(env.read_text()), indent=1))
            a = analyze(load_trace(src), *((pairs, False) if pairs is not None else pair_args(None, _pairs_for_source(src))))
            listed = sorted(a.pairs, key=lambda p: -p.verdict.severity)[:MAX_LISTED_PAIRS]  # UNORDERED first
            rep.add_table(f"ordering verdicts: {src.name}", ["producer", "consumer", "streams", "verdict", "edge", "gap (us)"],
                          [[p.producer, p.consumer, f"{p.producer_stream} -> {p.consumer_stream}", p.verdict.value.upper()
                            if p.verdict.value == "unordered" else p.verdict.value, json.dumps(p.edge.to_json()) if p.edge else "-",
                            f"{p.gap_ns / 1e3:.1f}"] for p in listed],
                          [p.verdict.value for p in listed])
            rep.add_table(f"streams: {src.name}", ["device", "stream", "kernels", "busy (ms)", "idle (ms)", "max gap (ms)"],
                          [[s.device, s.stream, s.kernels, f"{s.busy_ns / 1e6:.3f}", f"{s.idle_ns / 1e6:.3f}",
                            f"{s.max_gap_ns / 1e6:.3f}"] for s in a.streams])
            rep.add_table(f"kernels with the most GPU time: {src.name}", ["kernel", "launches", "total (ms)"],
                          [[name, n, f"{ns / 1e6:.3f}"] for name, n, ns in top_kernels(a.trace)])
            rep.add_figure(f"stream timeline: {src.name}", draw_timeline(timeline_data(a, range_regex=timeline_range)),
                           f"{len(a.trace.kernels)} kernels; {a.attribution.unattributed} unattributed; "
                           f"pairs: {a.pair_counts}")
        elif kind == "sanitize":
            runs += sanitizer_runs(src)
        else:
            cells = ablation_cells(src)
            rep.add_figure(f"ablation: {src.name}", draw_ablation(cells))
            rep.add_table("trials", ["variant", "failures / trials", "rate", "95% interval"],
                          [[c.label, f"{c.failures}/{c.trials}", f"{c.rate:.4f}",
                            f"[{c.lower:.4f}, {c.upper:.4f}]" + (" one-sided" if c.one_sided else "")] for c in cells])
    if runs:
        rep.add_figure("sanitizer verdicts", draw_verdicts(runs))
        rep.add_table("sanitizer findings", ["tool", "workload", "verdict", "kind", "kernel", "source", "count"],
                      [[r["tool"], r["workload"], r["verdict"], f["kind"], f["kernel"], f["source"], f["count"]]
                       for r in runs for f in r["findings"][:20]])
    return rep


def cmd_report(args: argparse.Namespace) -> int:
    rep = build_report(args.sources, "tracer report", args.range)
    out = rep.write(args.output)
    print(f"wrote {out} ({len(rep.sections)} sections)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from tracer.commands.sanitize import format_matrix
    from tracer.commands.trace import format_analysis
    from tracer.evidence import ablation_cells, sanitizer_runs
    from tracer.plots.ablation import draw_ablation
    from tracer.plots.perfetto import write_perfetto
    from tracer.plots.timeline import draw_timeline, save
    from tracer.plots.verdicts import draw_verdicts
    from tracer.trace.analyze import analyze
    from tracer.trace.load import load_trace
    from tracer.trace.timeline import timeline_data

    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    trace = DEMO_DIR / "linear_backward_planted.sqlite"
    sanitize, campaign = DEMO_DIR / "sanitize", DEMO_DIR / "campaign.json"
    print("== ordering verdicts (CUPTI capture of linear_backward with a planted cross-stream dgrad, H200)")
    a = analyze(load_trace(trace), DEMO_PAIRS)
    print(format_analysis(a))
    runs = sanitizer_runs(sanitize)
    print("\n== sanitizer matrix (compute-sanitizer on the planted workloads, H200)")
    print(format_matrix(runs, list(dict.fromkeys(r["workload"] for r in runs))))
    cells = ablation_cells(campaign)
    print("\n== campaign (fence variants and the planted race on cast_transpose_dgrad, H200)")
    for c in cells:
        print(f"  {c.label:<24} {c.failures:>4}/{c.trials:<5} rate {c.rate:.3f}  95% [{c.lower:.4f}, {c.upper:.4f}]"
              + (" (one-sided)" if c.one_sided else ""))
    save(draw_timeline(timeline_data(a, range_regex="^step1/")), out / "timeline.png")
    save(draw_verdicts(runs), out / "verdicts.png")
    save(draw_ablation(cells), out / "ablation.png")
    write_perfetto(a, out / "trace.perfetto.json")
    build_report([trace, sanitize, campaign], "tracer demo (sample data from an H200)", "^step1/", DEMO_PAIRS).write(out / "report.html")
    print(f"\nwrote {out}/timeline.png, verdicts.png, ablation.png, report.html, trace.perfetto.json", file=sys.stdout)
    return 0
