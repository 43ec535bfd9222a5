"""`tracer plot stream-timeline|verdicts|ablation`: pictures; the plot code only draws."""
from __future__ import annotations

import argparse
from pathlib import Path

from tracer.cliargs import add_pair_options, choose_pairs, open_source, open_trace_or_job
from tracer.errors import UsageError
from tracer.store.outpath import file_output, guard_output


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw a stream timeline, a sanitizer verdict matrix or an ablation chart")
    ps = p.add_subparsers(dest="plot_command", metavar="PLOT", required=True)
    t = ps.add_parser("stream-timeline", help="one lane per stream, NVTX lanes, event edges, producer -> consumer pairs")
    t.add_argument("source", type=Path, help="run directory (a job's: lanes per rank, device, stream) or trace file")
    t.add_argument("-o", "--output", type=file_output, default=Path("timeline.png"), help=".png or .svg (default timeline.png)")
    t.add_argument("--range", help="only kernels and NVTX ranges whose range name matches this regex")
    t.add_argument("--window", help="START:END from the first GPU operation, in microseconds or with a unit (480ms:520ms); "
                   "default: the densest part of the trace")
    add_pair_options(t, "all")
    t.add_argument("--no-pairs", action="store_true", help="do not draw producer -> consumer pairs")
    t.add_argument("--size", default="16x7", help="inches WxH (100 dpi)")
    t.set_defaults(func=cmd_timeline)
    v = ps.add_parser("verdicts", help="tool x workload matrix of sanitizer verdicts")
    v.add_argument("sources", type=Path, nargs="+", help="`tracer sanitize` output directories or report.json files")
    v.add_argument("-o", "--output", type=file_output, default=Path("verdicts.png"), help=".png or .svg (default verdicts.png)")
    v.set_defaults(func=cmd_verdicts)
    a = ps.add_parser("ablation", help="failure rate per variant with 95%% intervals")
    a.add_argument("source", type=Path, help="campaign store, or JSON of variant -> trials/failures")
    a.add_argument("-o", "--output", type=file_output, default=Path("ablation.png"), help=".png or .svg (default ablation.png)")
    a.set_defaults(func=cmd_ablation)


def parse_size(text: str) -> tuple[float, float]:
    try:
        w, h = (float(x) for x in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size {text!r} is not WxH in inches, e.g. 16x7") from None
    if not (1 <= w <= 100 and 1 <= h <= 100):
        raise UsageError(f"--size {text!r}: each side must be 1 to 100 inches")
    return w, h


def cmd_timeline(args: argparse.Namespace) -> int:
    from tracer.views.plots.timeline import draw_timeline, save
    from tracer.analysis.pairs import PairMode, PairSpec
    from tracer.analysis.selection import parse_range, parse_window
    from tracer.views.timeline_layout import timeline_data

    size, window, rx = parse_size(args.size), parse_window(args.window), parse_range(args.range)
    guard_output(args.output, [args.source])
    run = open_trace_or_job(args.source)
    spec = PairSpec(PairMode.NONE) if args.no_pairs else choose_pairs(args, run.pair_spec)
    a = run.analyze(spec)
    data = timeline_data(a, window, rx, show_pairs=not args.no_pairs, width_px=int(size[0] * 100))
    out = save(draw_timeline(data, size), args.output)
    counts = ((len(data.lanes), "stream lane"), (len(data.range_lanes), "NVTX lane"), (len(data.arrows), "arrow"))
    print(f"wrote {out}: " + ", ".join(f"{n} {w}" + ("" if n == 1 else "s") for n, w in counts))
    return 0


def cmd_verdicts(args: argparse.Namespace) -> int:
    from tracer.artifact import SanitizeRun, expect
    from tracer.views.plots.timeline import save
    from tracer.views.plots.verdicts import draw_verdicts

    guard_output(args.output, args.sources)
    runs = [r for s in args.sources for r in expect(s, open_source(s), SanitizeRun, "a sanitizer report").runs]
    out = save(draw_verdicts(runs), args.output)
    print(f"wrote {out}: {len(runs)} runs")
    return 0


def cmd_ablation(args: argparse.Namespace) -> int:
    from tracer.artifact import CampaignRun, expect
    from tracer.views.plots.ablation import draw_ablation
    from tracer.views.plots.timeline import save

    guard_output(args.output, [args.source])
    run: CampaignRun = expect(args.source, open_source(args.source), CampaignRun, "a campaign store or ablation JSON")
    out = save(draw_ablation(list(run.cells)), args.output)
    print(f"wrote {out}: {len(run.cells)} variants" + (f" ({len(run.empty)} without trials: {', '.join(run.empty)})"
                                                      if run.empty else ""))
    return 0
