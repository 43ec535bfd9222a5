"""`tracer quickstart`: the main job. On a GPU box, the seed workload under the tracer; without a
GPU, `tracer demo` on sample data (and it says so)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quickstart", help="trace the seed workload on a GPU box, or run the demo where there is no GPU")
    p.add_argument("-o", "--output", type=Path, help="run directory (GPU) or demo folder")
    p.set_defaults(func=cmd_quickstart)


def cmd_quickstart(args: argparse.Namespace) -> int:
    import torch

    from tracer.cli import main

    if not torch.cuda.is_available():
        print("tracer quickstart: no CUDA GPU visible, so running `tracer demo` on sample data captured on an H200",
              file=sys.stderr)
        return main(["demo", "-o", str(args.output or Path("tracer-demo"))])
    print("tracer quickstart: tracing the seed workload cast_transpose_dgrad (cast-transpose -> dgrad GEMM)", file=sys.stderr)
    argv = ["trace", "run", "cast_transpose_dgrad", "--backend", "auto"]
    return main(argv + (["-o", str(args.output)] if args.output else []))
