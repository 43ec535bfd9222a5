"""Command-line entry point: argparse subcommands, and the one place errors become exit codes."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tracer import __version__
from tracer.commands import campaign, doctor, kernels, plot, profile, quickstart, report, run, sanitize, trace
from tracer.errors import TracerError

COMMANDS = (quickstart, kernels, run, trace, sanitize, profile, campaign, plot, report, doctor)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracer", description="Investigate GPU kernel-ordering and numerical-corruption bugs.")
    parser.add_argument("--version", action="version", version=f"tracer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:  # everything after -- is the user's command (trace run, sanitize)
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    args = parser.parse_args(argv)
    args.command_after_dashdash = extra
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
