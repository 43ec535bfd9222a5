"""`tracer trace run|analyze|import|export`: capture under nsys or CUPTI, then ordering verdicts."""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from tracer.capture.options import MEMORY_DEFAULT
from tracer.commands.run import add_workload_options
from tracer.errors import ChecksFailed, TargetFailed, TimedOut, UsageError, unknown
from tracer.store.rundir import default_run_dir, environment, staged, write_json
from tracer.trace.analyze import Analysis, analyze, parse_pair_spec

BACKENDS = ("auto", "nsys", "cupti")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="capture a trace and judge stream ordering")
    ts = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)

    r = ts.add_parser("run", help="run a workload (or `-- command`) under nsys or CUPTI and analyze it")
    r.add_argument("workload", nargs="?", help="built-in workload or profile YAML; or give a command after --")
    r.add_argument("--backend", default="auto", help="auto (nsys when it can write reports, else cupti), nsys, cupti")
    r.add_argument("-o", "--output", type=Path, help="run directory (default runs/NAME-TIMESTAMP)")
    r.add_argument("--timeout", type=float, default=1800, help="seconds before the whole process group is killed")
    r.add_argument("--cuda-event-trace", action="store_true", help="nsys: --cuda-event-trace=true for cross-stream edges")
    r.add_argument("--capture-range", help="nsys: only capture inside this NVTX range")
    r.add_argument("--memory", action=argparse.BooleanOptionalAction, default=None,
                   help=f"cupti: record the memory each kernel reads and writes (default: {MEMORY_DEFAULT})")
    _analysis_options(r)
    add_workload_options(r)
    r.set_defaults(func=cmd_run)

    a = ts.add_parser("analyze", help="ordering verdicts and stream statistics of a run directory or trace file")
    a.add_argument("source", type=Path, help="run directory, .sqlite, .nsys-rep, or PyTorch profiler .json[.gz]")
    _analysis_options(a)
    a.set_defaults(func=cmd_analyze)

    i = ts.add_parser("import", help="make a run directory from a trace made elsewhere")
    i.add_argument("source", type=Path)
    i.add_argument("-o", "--output", type=Path)
    _analysis_options(i)
    i.set_defaults(func=cmd_import)

    e = ts.add_parser("export", help="export a trace for other viewers")
    e.add_argument("source", type=Path)
    e.add_argument("--perfetto", action="store_true", required=True, help="Chrome trace JSON for ui.perfetto.dev")
    e.add_argument("-o", "--output", type=Path, required=True)
    e.set_defaults(func=cmd_export)


def _analysis_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pairs", action="append", help="'all' or PRODUCER_GLOB:CONSUMER_GLOB (repeatable); "
                   "default: the profile's pairs, else all")
    p.add_argument("--json", action="store_true", help="print the verdict JSON")
    p.add_argument("--fail-on-unordered", action="store_true", help="exit 1 when any pair is UNORDERED")


def pair_args(given: list[str] | None, default: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], bool]:
    if not given:
        return default, not default
    if "all" in given:
        return [], True
    return [parse_pair_spec(g) for g in given], False


def report(analysis: Analysis, as_json: bool, fail_on_unordered: bool) -> int:
    print(json.dumps(analysis.to_json(), indent=1) if as_json else format_analysis(analysis))
    if fail_on_unordered and analysis.unordered:
        raise ChecksFailed(f"{analysis.unordered} producer -> consumer pair(s) are UNORDERED")
    return 0


def format_analysis(a: Analysis) -> str:
    t = a.trace
    lines = [f"{t.source}: {t.producer}", f"{len(t.kernels)} kernels, {len(t.ranges.start)} NVTX ranges, "
             f"{a.attribution.unattributed} kernels unattributed ({a.attribution.no_launch_record} without a launch record), "
             f"{len(t.records)} event records, {a.event_edges} event edges, {a.unmatched_waits} waits on unknown records",
             f"{'device':>6} {'stream':>8} {'kernels':>8} {'busy ms':>10} {'idle ms':>10} {'max gap ms':>11}"]
    for s in a.streams:
        lines.append(f"{s.device:>6} {s.stream:>8} {s.kernels:>8} {s.busy_ns / 1e6:>10.3f} {s.idle_ns / 1e6:>10.3f} {s.max_gap_ns / 1e6:>11.3f}")
    lines.append(f"pairs ({a.pair_spec}): " + ", ".join(f"{k} {v}" for k, v in a.pair_counts.items()))
    shown = sorted(a.pairs, key=lambda p: -p.verdict.severity)[:40]
    for p in shown:
        edge = p.edge.to_json() if p.edge else {}
        lines.append(f"  {p.verdict.value.upper() if p.verdict.value == 'unordered' else p.verdict.value:<18} "
                     f"{p.producer} [s{p.producer_stream}] -> {p.consumer} [s{p.consumer_stream}] gap {p.gap_ns / 1e3:.1f} us {edge or ''}")
    if len(a.pairs) > len(shown):
        lines.append(f"  ... {len(a.pairs) - len(shown)} more (--json lists up to 200)")
    return "\n".join(lines)


def _target(args: argparse.Namespace, extra: list[str]) -> tuple[str, list[str], list[tuple[str, str]]]:
    """(name, command, default pairs) for a built-in workload, a profile, or a user command."""
    if extra:
        if args.workload:
            raise UsageError("give either WORKLOAD or a command after --, not both")
        return Path(extra[0]).name.replace(".py", ""), extra, []
    if not args.workload:
        raise UsageError("nothing to trace: give a WORKLOAD or a command after --")
    from tracer.commands.run import spec_from_args

    spec = spec_from_args(args)
    cmd = [sys.executable, "-m", "tracer", "run", args.workload, "--no-fail-on-check"]
    for flag in ("variant", "config", "shape", "steps", "seed", "layers", "microbatches"):
        value = getattr(args, flag)
        if value is not None:
            cmd += [f"--{flag}", str(value)]
    if args.checkpointing is not None:
        cmd.append("--checkpointing" if args.checkpointing else "--no-checkpointing")
    return spec.name, cmd, list(spec.pairs)


def choose_backend(name: str) -> str:
    if name not in BACKENDS:
        raise unknown("backend", name, BACKENDS)
    if name != "auto":
        return name
    from tracer.capture.nsys import importer_status

    return "nsys" if importer_status()[0] else "cupti"


def cmd_run(args: argparse.Namespace) -> int:
    extra = list(getattr(args, "command_after_dashdash", []) or [])
    backend = "cupti" if args.memory and args.backend == "auto" else choose_backend(args.backend)
    if args.memory and backend != "cupti":
        raise UsageError(f"--memory needs the cupti backend, not {backend!r}")
    memory = MEMORY_DEFAULT if args.memory is None else args.memory
    name, command, default_pairs = _target(args, extra)
    pairs, all_pairs = pair_args(args.pairs, default_pairs)
    final = args.output or default_run_dir(name)
    captured = None
    with staged(final) as tmp:
        logs = tmp / "logs"
        logs.mkdir()
        if backend == "nsys":
            from tracer.capture.nsys import capture

            res = capture(command, tmp / "trace.sqlite", logs, args.timeout,
                          cuda_event_trace=args.cuda_event_trace, capture_range=args.capture_range)
        else:
            from tracer.capture.launcher import capture_run

            captured = capture_run(command, tmp, logs, args.timeout, memory=memory, describe=True)
            res = captured.proc
        write_json(tmp / "command.json", {"argv": command, "backend": backend, "exit": res.returncode,
                                          "timed_out": res.timed_out, "seconds": round(res.seconds, 3),
                                          "capture_argv": list(res.argv)} | (captured.command_fields() if captured else {}))
        write_json(tmp / "environment.json", captured.environment if captured and captured.environment else environment())
        if captured is None and (res.timed_out or not (tmp / "trace.sqlite").is_file()):
            tail = " | ".join(res.stderr().strip().splitlines()[-3:])[-300:]
            raise UsageError(f"capture of {name} produced no trace (exit {res.returncode}, timed out: {res.timed_out}); "
                             f"stderr ends: {tail or '(empty)'}")
        from tracer.trace.load import load_trace

        analysis = analyze(load_trace(tmp / "trace.sqlite"), pairs, all_pairs) if (tmp / "trace.sqlite").is_file() else None
        if analysis is not None:
            partial = bool(captured and captured.partial)
            write_json(tmp / "verdict.json", analysis.to_json() | {"target_exit": res.returncode, "partial": partial})
    print(f"run directory: {final} (backend {backend}, target exit {res.returncode})", file=sys.stderr)
    if captured is None:
        return report(analysis, args.json, args.fail_on_unordered)  # type: ignore[arg-type]
    return _cupti_outcome(final, captured, analysis, args)


def _cupti_outcome(final: Path, captured, analysis: Analysis | None, args: argparse.Namespace) -> int:  # type: ignore[no-untyped-def]
    """The processes and how each ended (when there was more than one, or one did not end well),
    the analysis of the one trace or the job notice; then a failed target (exit 7) or a timeout
    (exit 8) before UNORDERED pairs (exit 1). A run whose processes left no kernels is never an
    empty analysis."""
    from tracer.capture.launcher import describe

    procs = captured.processes
    missed = [p["file"] for p in procs if p.get("untraced_cuda")]
    if len(procs) > 1 or missed or any(p.get("outcome") not in ("complete", "no CUDA") for p in procs):
        print(f"processes ({len(procs)}):", file=sys.stderr)
        for p in procs:
            print(describe(p), file=sys.stderr)
    failure = captured.failure()
    if analysis is not None:
        if captured.partial:
            print("tracer: warning: the trace is PARTIAL (its process died): what it flushed before dying", file=sys.stderr)
        print(json.dumps(analysis.to_json(), indent=1) if args.json else format_analysis(analysis))
    elif captured.job:
        _job_notice(final, captured.command_fields())
    elif not failure and not captured.proc.timed_out:
        why = f" ({', '.join(missed)} used CUDA by a path tracer does not see)" if missed else ""
        raise UsageError(f"no process of the command recorded a CUDA kernel{why}: nothing to analyse (see {final}/command.json)")
    if captured.proc.timed_out:
        raise TimedOut(f"the traced command was killed at its --timeout of {args.timeout:g} s; what it left: {final}")
    if failure:
        raise TargetFailed(f"{failure}; what was recorded is in {final} (logs in {final / 'logs'})")
    if analysis is not None and args.fail_on_unordered and analysis.unordered:
        raise ChecksFailed(f"{analysis.unordered} producer -> consumer pair(s) are UNORDERED")
    return 0


def _job_notice(final: Path, fields: dict) -> None:
    """Several processes recorded kernels: their traces stay under procs/ (job analysis: issue #16)."""
    busy = [p["file"] for p in fields["processes"] if (p.get("kernels") or 0) > 0]
    print(f"run directory: {final} (job: {len(busy)} processes recorded kernels: {', '.join(busy)}); "
          f"analyze one with `tracer trace analyze {final}/procs/FILE.sqlite`", file=sys.stderr)


def _pairs_for_source(source: Path) -> list[tuple[str, str]]:
    verdict = source / "verdict.json" if source.is_dir() else None
    if verdict and verdict.is_file():
        spec = json.loads(verdict.read_text()).get("pair_spec", "none")
        if spec not in ("none", "all"):
            return [parse_pair_spec(s.strip()) for s in spec.split(", ")]
    return []


def cmd_analyze(args: argparse.Namespace) -> int:
    from tracer.trace.load import load_trace

    pairs, all_pairs = pair_args(args.pairs, _pairs_for_source(args.source))
    return report(analyze(load_trace(args.source), pairs, all_pairs), args.json, args.fail_on_unordered)


def cmd_import(args: argparse.Namespace) -> int:
    from tracer.trace.load import load_trace

    trace = load_trace(args.source)
    pairs, all_pairs = pair_args(args.pairs, [])
    analysis = analyze(trace, pairs, all_pairs)
    final = args.output or default_run_dir(args.source.name.split(".")[0])
    with staged(final) as tmp:
        src = Path(trace.source)
        shutil.copyfile(src, tmp / ("trace.sqlite" if src.suffix == ".sqlite" else src.name))
        write_json(tmp / "command.json", {"imported_from": str(args.source.resolve()), "backend": "import"})
        write_json(tmp / "verdict.json", analysis.to_json())
    print(f"run directory: {final}", file=sys.stderr)
    return report(analysis, args.json, args.fail_on_unordered)


def cmd_export(args: argparse.Namespace) -> int:
    from tracer.plots.perfetto import write_perfetto
    from tracer.trace.load import load_trace

    trace = load_trace(args.source)
    n = write_perfetto(analyze(trace, _pairs_for_source(args.source)), args.output)
    print(f"wrote {args.output} ({n} events); open it in ui.perfetto.dev")
    return 0
