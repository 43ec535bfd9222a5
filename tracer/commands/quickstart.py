"""`tracer quickstart`: the main job. On a GPU box, the seed workload under the tracer; without a
GPU, `tracer demo` on sample data (and it says so)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracer.errors import TargetFailed

SEED = "cast_transpose_dgrad"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quickstart", help="trace the seed workload on a GPU box, or run the demo where there is no GPU")
    p.add_argument("-o", "--output", type=Path,
                   help="run directory (GPU; default runs/NAME-TIMESTAMP) or demo folder (default: a new folder in the "
                        "system's temp directory)")
    p.set_defaults(func=cmd_quickstart)


def cmd_quickstart(args: argparse.Namespace) -> int:
    import torch

    if not torch.cuda.is_available():
        from tracer.app.demo import run_demo

        print("tracer quickstart: no CUDA GPU visible, so running `tracer demo` on sample data captured on an H200",
              file=sys.stderr)
        print(run_demo(args.output))
        return 0
    from tracer.app.trace_run import CaptureRequest, choose_backend, record
    from tracer.cliargs import choose_pairs, workload_command
    from tracer.store.rundir import default_run_dir
    from tracer.views.job_text import format_result
    from tracer.workloads.spec import load_workload

    print(f"tracer quickstart: tracing the seed workload {SEED} (cast-transpose -> dgrad GEMM)", file=sys.stderr)
    name, command, pairs = workload_command(load_workload(SEED), SEED, [])
    out = args.output or default_run_dir(name)
    rec = record(CaptureRequest(name=name, command=tuple(command), backend=choose_backend("auto"), output=out, timeout=1800.0),
                 choose_pairs(None, pairs, "all"))
    print(f"run directory: {out}", file=sys.stderr)
    for line in rec.notices(listed=rec.job):
        print(line, file=sys.stderr)
    print(format_result(rec.analysis))
    from tracer.app.demo import NEXT_STEPS

    print("\n".join(NEXT_STEPS[:3]), file=sys.stderr)  # the same commands on one's own program
    if rec.target_failure:
        raise TargetFailed(rec.target_failure)
    return 0
