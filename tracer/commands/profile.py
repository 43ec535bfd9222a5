"""`tracer profile [run] WORKLOAD | -- command`, `profile compare RUN...`, `profile import FILE`: ncu counters."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from tracer.errors import UsageError

DEFAULT_ACTION = "run"  # `tracer profile WORKLOAD` is `tracer profile run WORKLOAD`
OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {  # flags -> the actions that take them, (r)un, (c)ompare, (i)mport; add_argument keywords
    "--config": ("rc", {"help": "LOAD/STORE widths of the workload's kernels, or auto (compare --sass: their config)"}),
    "--kernel": ("rc", {"help": "only kernels whose name matches this regex (workloads: the cast-transpose kernel)"}),
    "--range": ("rc", {"action": "append", "default": [], "dest": "ranges", "metavar": "NAME", "help": "only kernels in "
                       "tracer's NVTX range NAME (repeatable; compare: a glob)"}),
    "--baseline": ("rc", {"default": "none", "help": "the group the others are compared with (default: none)"}),
    "--by": ("rc", {"default": "auto", "help": "auto (default), label, nvtx, kernel: what makes a group"}),
    "--sass": ("rc", {"nargs": 2, "metavar": ("A", "B"), "help": "variants A and B side by side with their SASS summaries"}),
    "--plot": ("rc", {"type": Path, "help": "write the stall breakdown and throughput chart here (.png, .svg)"}),
    "-o --output": ("ri", {"type": Path, "help": "run directory (default runs/profile-NAME-TIMESTAMP)"}),
    "--json": ("rci", {"action": "store_true", "help": "print JSON"}),
    "--variant": ("r", {"action": "append", "default": [], "help": "kernel variant (repeatable; 'all': the fence variants)"}),
    "--shape": ("r", {"help": "shape override of the workload"}),
    "--steps": ("r", {"type": int, "default": 1, "help": "workload steps (default 1)"}),
    "--nvtx-include": ("r", {"action": "append", "default": [], "metavar": "EXPR", "help": "ncu --nvtx-include EXPR"}),
    "--launch-skip": ("r", {"type": int, "default": 0, "help": "matching launches to skip first"}),
    "--launch-count": ("r", {"type": int, "help": "matching launches to profile (default: all)"}),
    "--section": ("r", {"action": "append", "default": [], "help": "a section on top of the default five (repeatable)"}),
    "--source-counters": ("r", {"action": "store_true", "help": "add SourceCounters (per-instruction stalls; slower)"}),
    "--clock-control": ("r", {"default": "none", "help": "none (default: the GPU's own clocks) or base (locked)"}),
    "--cache-control": ("r", {"default": "all", "help": "all (default: flush caches before each pass) or none"}),
    "--timeout": ("r", {"type": float, "default": 1800, "help": "seconds per ncu run before its process group is killed"}),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="Nsight Compute counters per kernel launch (also: compare RUN, import FILE)")
    ps = p.add_subparsers(dest="profile_command", metavar="ACTION", required=True)
    r = ps.add_parser("run", help="ncu on a workload's variants or on `-- command` (the default action)")
    r.add_argument("workload", nargs="?", help="a built-in workload or profile YAML; or give a command after --")
    c = ps.add_parser("compare", help="medians, deltas against a baseline, the stall that grew most")
    c.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="`tracer profile` run directories")
    i = ps.add_parser("import", help="a run directory from an .ncu-rep or raw CSV made elsewhere")
    i.add_argument("file", nargs="?", type=Path, help="FILE.ncu-rep or FILE.csv")
    i.add_argument("--label", help="the name of the report's group (default: the file's stem)")
    for flag, (where, kw) in OPTIONS.items():
        for q in ({"r": r, "c": c, "i": i}[ch] for ch in where):
            q.add_argument(*flag.split(), **kw)
    for q, func in ((r, cmd_run), (c, cmd_compare), (i, cmd_import)):
        q.set_defaults(func=func)


def cmd_run(args: argparse.Namespace) -> int:
    from tracer.ncu.session import Settings, plan, progress_line, record

    p = plan(args.workload, args.command_after_dashdash, variants=args.variant, config=args.config, shape=args.shape,
             steps=args.steps)
    settings = Settings(**{f.name: tuple(v) if isinstance(v := getattr(args, f.name), list) else v for f in fields(Settings)})  # type: ignore[arg-type]  # by field name from the parsed flags
    run = record(p, settings, args.output, lambda r: print(progress_line(r), file=sys.stderr))
    print(f"run directory: {run.path}", file=sys.stderr)
    return show_run(run, args)


def cmd_import(args: argparse.Namespace) -> int:
    from tracer.ncu.session import import_report

    if args.file is None:
        raise UsageError("usage: tracer profile import FILE.ncu-rep|FILE.csv")
    run = import_report(args.file, args.label, args.output)
    print(f"run directory: {run.path}", file=sys.stderr)
    return show_run(run, args)


def show_run(run: Any, args: argparse.Namespace) -> int:
    from tracer.ncu.text import format_run

    print(json.dumps(run.to_json(), indent=1) if args.json else format_run(run))
    return cmd_compare(args, [run]) if len(run.targets) > 1 and not args.json else 0


def cmd_compare(args: argparse.Namespace, loaded: list[Any] | None = None) -> int:  # loaded: a run of several targets
    from tracer.ncu.session import comparison
    from tracer.ncu.profile_json import load_run

    if loaded is None and not args.runs:
        raise UsageError("usage: tracer profile compare RUN [RUN...] [--baseline VARIANT]")
    runs = loaded or [load_run(p) for p in args.runs]
    cmp, text = comparison(runs, baseline=args.baseline, by=args.by, kernel=None if loaded else args.kernel,
                           nvtx=args.ranges[0] if not loaded and args.ranges else None, as_json=args.json,
                           sass=args.sass, config=args.config)
    print(("\n" if loaded else "") + text)
    if args.plot:
        from tracer.views.plots.ncu import draw_comparison
        from tracer.views.plots.timeline import save

        print(f"wrote {save(draw_comparison(cmp), args.plot)}")
    return 0
