"""`tracer trace run|analyze|import|export`: capture under nsys or CUPTI, then ordering verdicts."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tracer.cliargs import (add_analysis_options, add_capture_options, add_workload_options, choose_pairs, file_output, hazards_wanted,
                            open_trace, open_trace_or_job)
from tracer.errors import ChecksFailed


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="capture a trace and judge stream ordering")
    ts = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    r = ts.add_parser("run", help="run a workload (or `-- command`) under nsys or CUPTI and analyze it")
    r.add_argument("workload", nargs="?", help="built-in workload or profile YAML; or give a command after --")
    add_capture_options(r)
    add_analysis_options(r)
    add_workload_options(r)
    r.set_defaults(func=cmd_run)
    a = ts.add_parser("analyze", help="ordering verdicts and stream statistics of a run directory or trace file")
    a.add_argument("source", type=Path, help="run directory (a job's too), .sqlite, .nsys-rep, or PyTorch profiler .json[.gz]")
    add_analysis_options(a)
    a.add_argument("--explain", action="store_true", help="where the time went: overlap, idle gaps by cause, critical path")
    a.set_defaults(func=cmd_analyze)
    i = ts.add_parser("import", help="make a run directory from a trace made elsewhere")
    i.add_argument("source", type=Path, help=".sqlite, .nsys-rep, or PyTorch profiler .json[.gz]")
    i.add_argument("-o", "--output", type=Path, help="run directory (default runs/NAME-TIMESTAMP)")
    add_analysis_options(i)
    i.set_defaults(func=cmd_import)
    e = ts.add_parser("export", help="export a trace for other viewers")
    e.add_argument("source", type=Path, help="run directory or trace file")
    e.add_argument("--perfetto", action="store_true", required=True, help="Chrome trace JSON for ui.perfetto.dev")
    e.add_argument("-o", "--output", type=file_output, required=True, help="the JSON file to write")
    e.set_defaults(func=cmd_export)


def finish(analysis, args: argparse.Namespace, ended: Exception | None = None, checks=None) -> int:
    """Print the verdicts (a job's: every process's); then how the run ended (a timeout: exit 8, a
    failed target: exit 7), then the checks asked for (exit 1; `checks` defaults to the analysis's)."""
    from tracer.views.job_text import format_result

    print(json.dumps(analysis.to_json(), indent=1) if args.json else format_result(analysis))
    if ended is not None:
        raise ended
    problems = (checks or analysis.failures)(args.fail_on_unordered, args.fail_on_hazard)
    if problems:
        raise ChecksFailed("; ".join(problems))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from tracer.app.trace_run import CaptureRequest, capture_mode, ending_error, record
    from tracer.cliargs import trace_target
    from tracer.store.rundir import default_run_dir

    (backend, memory), hazards = capture_mode(args.backend, args.memory, args.stop_after, args.memory_steps + args.memory_range), hazards_wanted(args)
    name, command, profile_pairs = trace_target(args, list(args.command_after_dashdash))
    out = args.output or default_run_dir(name)
    req = CaptureRequest(name=name, command=tuple(command), backend=backend, output=out, timeout=args.timeout,
                         cuda_event_trace=args.cuda_event_trace, capture_range=args.capture_range, memory=memory,
                         stop_after=args.stop_after, memory_steps=args.memory_steps, memory_range=args.memory_range)
    rec = record(req, choose_pairs(args, profile_pairs), hazards)
    print(f"run directory: {out} (backend {backend}, target exit {rec.target_exit})", file=sys.stderr)
    for line in rec.notices(listed=rec.job and not args.json):
        print(line, file=sys.stderr)
    return finish(rec.analysis, args, ending_error(rec), rec.failures)


def cmd_analyze(args: argparse.Namespace) -> int:
    run, hazards = open_trace_or_job(args.source), hazards_wanted(args)
    result = run.analyze(choose_pairs(args, run.pair_spec), hazards)
    if args.explain:
        from tracer.analysis.explain import with_time

        result = with_time(result)
    return finish(result, args)


def cmd_import(args: argparse.Namespace) -> int:
    from tracer.app.trace_run import import_run
    from tracer.store.rundir import default_run_dir

    out = args.output or default_run_dir(args.source.name.split(".")[0])
    rec = import_run(open_trace(args.source), out, choose_pairs(args, None), hazards_wanted(args))
    print(f"run directory: {out}", file=sys.stderr)
    return finish(rec.analysis, args)


def cmd_export(args: argparse.Namespace) -> int:
    from tracer.views.plots.perfetto import write_perfetto
    from tracer.store.outpath import guard_output

    guard_output(args.output, [args.source])
    run = open_trace_or_job(args.source)
    n = write_perfetto(run.analyze(choose_pairs(None, run.pair_spec, "none"), hazards=False), args.output)
    print(f"wrote {args.output} ({n} events); open it in ui.perfetto.dev")
    return 0
