"""Options several commands share, and their conversion into what the stages take: the workload
options (and their re-serialisation for a child `tracer run`), producer -> consumer pairs, and the
opening of a source path (an .nsys-rep is exported to SQLite here, before the reading layer sees it)."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracer.capture.options import MEMORY_DEFAULT
from tracer.errors import UsageError
from tracer.store.outpath import file_output as file_output  # the type of a one-file output option, for commands
from tracer.analysis.pairs import PairMode, PairSpec

if TYPE_CHECKING:  # the reading layer is imported when a source is opened, not to build the parser
    from tracer.artifact import Artifact, JobRun, TraceRun
    from tracer.workloads.spec import WorkloadSpec

WORKLOAD_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--variant", {"help": "kernel variant (see `tracer kernels list`)"}),
    ("--config", {"help": "LOAD/STORE widths in bytes, or 'auto' for the heuristic"}),
    ("--shape", {"help": "TOKENSxHIDDEN, or TOKENSxOUTxIN for the dgrad workloads"}),
    ("--steps", {"type": int, "help": "training steps to run (default: the profile's)"}),
    ("--seed", {"type": int, "help": "seed of the random inputs and weights (default: the profile's)"}),
    ("--layers", {"type": int, "help": "linear layers in the stack (default: the profile's)"}),
    ("--microbatches", {"type": int, "help": "microbatches per step, gradients accumulated (default: the profile's)"}),
    ("--checkpointing", {"action": argparse.BooleanOptionalAction, "default": None,
                         "help": "recompute the forward in backward (default: the profile's)"}),
)
PAIRS_HELP = ("'all' or PRODUCER_GLOB:CONSUMER_GLOB (repeatable), e.g. '*/cast_transpose:*/dgrad'; "
              "default: the run's or the profile's pairs")


def add_pair_options(p: argparse.ArgumentParser, default: str) -> None:
    """--pairs, and --producer GLOB --consumer GLOB for names with '::' (see choose_pairs)."""
    p.add_argument("--pairs", action="append", help=f"{PAIRS_HELP}, else {default}")
    p.add_argument("--producer", action="append", help="producer glob, with --consumer (for names with '::'; repeatable)")
    p.add_argument("--consumer", action="append", help="consumer glob of the --producer given at the same position")


def add_workload_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("workload options (override the profile)")
    for flag, kw in WORKLOAD_OPTIONS:
        group.add_argument(flag, **kw)


def workload_argv(args: argparse.Namespace) -> list[str]:
    """The workload options that were given, as `tracer run` arguments: every option of
    WORKLOAD_OPTIONS, so a new option cannot be dropped on the way to the child."""
    out: list[str] = []
    for flag, kw in WORKLOAD_OPTIONS:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is None:
            continue
        if kw.get("action") is argparse.BooleanOptionalAction:
            out.append(flag if value else f"--no-{flag[2:]}")
        else:
            out += [flag, str(value)]
    return out


def _positive(name: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageError(f"--{name}={value} must be >= 1")
    return value


def spec_from_args(args: argparse.Namespace) -> WorkloadSpec:
    from tracer.workloads.spec import resolve_workload

    return resolve_workload(args.workload, variant=args.variant, config=args.config, shape=args.shape,
                            steps=_positive("steps", args.steps), seed=args.seed, layers=_positive("layers", args.layers),
                            microbatches=_positive("microbatches", args.microbatches), checkpointing=args.checkpointing)


def trace_target(args: argparse.Namespace, extra: list[str]) -> tuple[str, list[str], PairSpec | None]:
    """(name, command, the profile's pairs) of `trace run`: a built-in workload or profile run by a
    child `tracer run` with the same workload options, or the user's command after --."""
    if extra:
        if args.workload:
            raise UsageError("give either WORKLOAD or a command after --, not both")
        return Path(extra[0]).name.replace(".py", ""), extra, None
    if not args.workload:
        raise UsageError("nothing to trace: give a WORKLOAD or a command after --")
    return workload_command(spec_from_args(args), args.workload, workload_argv(args))


def workload_command(spec: WorkloadSpec, workload: str, options: list[str]) -> tuple[str, list[str], PairSpec | None]:
    """(name, `tracer run` argv, the profile's pairs) of a workload with these workload options."""
    cmd = [sys.executable, "-m", "tracer", "run", workload, "--no-fail-on-check", *options]
    return spec.name, cmd, PairSpec.of(spec.pairs) if spec.pairs else None


def add_capture_options(p: argparse.ArgumentParser) -> None:
    """How `trace run` captures: the backend and its options, the run directory, the timeout."""
    p.add_argument("--backend", default="auto", help="auto (nsys when it can write reports, else cupti), nsys, cupti")
    p.add_argument("-o", "--output", type=Path, help="run directory (default runs/NAME-TIMESTAMP)")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds before the whole process group is stopped (its traces are still analysed; exit 8)")
    p.add_argument("--stop-after", type=float, metavar="SECONDS",
                   help="cupti (auto picks it): finish the traces after SECONDS and leave the command running, untraced")
    p.add_argument("--cuda-event-trace", action="store_true", help="nsys: --cuda-event-trace=true for cross-stream edges")
    p.add_argument("--capture-range", help="nsys: only capture inside this NVTX range")
    p.add_argument("--memory", action=argparse.BooleanOptionalAction, default=None,
                   help=f"record the memory each kernel reads and writes, for the hazard check (cupti, which auto "
                        f"then picks; default: {'on' if MEMORY_DEFAULT else 'off'})")
    p.add_argument("--memory-steps", metavar="A:B", default="",
                   help="record memory sets only inside the NVTX step ranges A to B-1 (step3, iteration 3, iter_3: "
                        "slice notation; implies --memory); the rest is traced as plain CUPTI and counted as not judged")
    p.add_argument("--memory-range", metavar="GLOB", default="",
                   help="record memory sets only while an NVTX range matching GLOB is open (implies --memory)")


def add_analysis_options(p: argparse.ArgumentParser) -> None:
    """What `trace run|analyze|import` judge and when they fail."""
    add_pair_options(p, "all (hazards instead where the trace has memory access sets)")
    p.add_argument("--json", action="store_true", help="print the verdict JSON")
    p.add_argument("--fail-on-unordered", action="store_true", help="exit 1 when any pair is UNORDERED")
    p.add_argument("--hazards", action=argparse.BooleanOptionalAction, default=True,
                   help="memory hazards between streams (where the trace has memory access sets; default on)")
    p.add_argument("--fail-on-hazard", action="store_true", help="exit 1 on any hazard, or when hazards cannot be checked")


def choose_pairs(args: argparse.Namespace | None, recorded: PairSpec | None, fallback: str = "all") -> PairSpec:
    """--pairs and --producer/--consumer of args (None, or options it lacks: none given), else the
    pairs the run or profile was made with, else `fallback`: 'all' (implicit: where the trace has
    memory access sets, hazards judge instead) or 'none'."""
    given = (getattr(args, "pairs", None), getattr(args, "producer", None), getattr(args, "consumer", None))
    spec = PairSpec.from_args(*given, default=recorded)
    return PairSpec(PairMode.NONE) if spec.implicit and fallback == "none" else spec


def hazards_wanted(args: argparse.Namespace) -> bool:
    """--hazards (on by default); --fail-on-hazard needs it, refused before anything runs."""
    if args.fail_on_hazard and not args.hazards:
        raise UsageError("--fail-on-hazard needs the hazard check: drop --no-hazards")
    return bool(args.hazards)


def readable(path: Path) -> Path:
    """An .nsys-rep exported to SQLite beside it (needs nsys); any other path as it is."""
    if path.name.lower().endswith(".nsys-rep"):
        from tracer.capture.nsys import export_sqlite

        return export_sqlite(path)
    return path


SANITIZER_XML_ROOT = b"<ComputeSanitizerOutput"


def sanitizer_xml(path: Path) -> bool:
    """compute-sanitizer's own XML (--xml --save FILE.xml), by its root element."""
    if path.suffix.lower() != ".xml" or not path.is_file():
        return False
    with path.open("rb") as fh:
        return SANITIZER_XML_ROOT in fh.read(4096)


def import_sanitizer_xml(path: Path) -> Artifact:
    """A raw compute-sanitizer XML judged as `tracer sanitize import FILE.xml` judges it (shipped suppressions)."""
    from tracer.artifact import SanitizeRun
    from tracer.sanitize.plan import load_suppressions
    from tracer.sanitize.runner import import_outputs

    return SanitizeRun(path, (import_outputs(path, None, load_suppressions([])),))


def open_source(path: Path) -> Artifact:
    """The artifact at path (a trace file keeps the name it was given, an .nsys-rep too; a raw
    compute-sanitizer XML is imported)."""
    from tracer.artifact import TraceRun, open_artifact

    if sanitizer_xml(path):
        return import_sanitizer_xml(path)
    art = open_artifact(readable(path))
    return replace(art, path=path) if isinstance(art, TraceRun) and art.run_dir is None else art


def open_trace(path: Path) -> TraceRun:
    from tracer.artifact import TraceRun, expect

    run: TraceRun = expect(path, open_source(path), TraceRun, "a trace")
    return run


def open_trace_or_job(path: Path) -> TraceRun | JobRun:
    """A trace, or a job run directory (several processes under procs/)."""
    from tracer.artifact import JobRun, TraceRun, expect

    art = open_source(path)
    run: TraceRun | JobRun = art if isinstance(art, JobRun) else expect(path, art, TraceRun, "a trace or a job")
    return run
