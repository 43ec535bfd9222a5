"""Command-line entry point: argparse subcommands, and the one place errors become exit codes."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tracer import __version__
from tracer.commands import doctor, kernels, run
from tracer.errors import TracerError

COMMANDS = (kernels, run, doctor)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracer", description="Investigate GPU kernel-ordering and numerical-corruption bugs.")
    parser.add_argument("--version", action="version", version=f"tracer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TracerError as exc:
        print(f"tracer: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tracer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
