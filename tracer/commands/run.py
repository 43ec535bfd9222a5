"""`tracer run WORKLOAD`: run a seed workload with the corruption detector, print the verdicts."""
from __future__ import annotations

import argparse
import json
from dataclasses import replace

from tracer.errors import ChecksFailed, UsageError
from tracer.kernel.spec import Config, parse_variant
from tracer.workloads.spec import WorkloadSpec, load_workload, parse_shape


def add_workload_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", help="kernel variant (see `tracer kernels list`)")
    p.add_argument("--config", help="LOAD/STORE widths in bytes, or 'auto' for the heuristic")
    p.add_argument("--shape", help="TOKENSxHIDDEN, or TOKENSxOUTxIN for the dgrad workloads")
    p.add_argument("--steps", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--microbatches", type=int)
    p.add_argument("--checkpointing", action=argparse.BooleanOptionalAction, default=None)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a workload with the corruption detector")
    p.add_argument("workload", help="a built-in workload name or a profile YAML")
    add_workload_options(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--device", default="cuda", help="cuda (default), or cpu for torch_composite only")
    p.add_argument("--no-fail-on-check", action="store_true",
                   help="exit 0 even when a check fails (for running under another tool, e.g. compute-sanitizer)")
    p.set_defaults(func=cmd_run)


def _positive(name: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise UsageError(f"--{name}={value} must be >= 1")
    return value


def spec_from_args(args: argparse.Namespace) -> WorkloadSpec:
    spec = load_workload(args.workload)
    shape = parse_shape(args.shape, spec.kind) if args.shape is not None else {}
    config = None if args.config in (None, "auto") else Config.parse(args.config)
    over = dict(
        variant=parse_variant(args.variant) if args.variant else None,
        steps=_positive("steps", args.steps), seed=args.seed, layers=_positive("layers", args.layers),
        microbatches=_positive("microbatches", args.microbatches), checkpointing=args.checkpointing, **shape,
    )
    spec = spec.with_overrides(**over)
    if args.config == "auto":
        return replace(spec, config=None)
    return spec.with_overrides(config=config)


def cmd_run(args: argparse.Namespace) -> int:
    from tracer.workloads.runner import format_report, run_workload

    report = run_workload(spec_from_args(args), args.device)
    print(json.dumps(report.to_json(), indent=1) if args.json else format_report(report))
    if not report.passed and not args.no_fail_on_check:
        raise ChecksFailed(f"{report.spec.name}: {sum(not v.passed for v in report.verdicts)} check(s) failed")
    return 0
