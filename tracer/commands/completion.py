"""`tracer completion bash|zsh|fish`: a shell completion script made from tracer's own parsers."""
from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh, fish)")
    p.add_argument("shell", help="bash, zsh or fish")
    p.set_defaults(func=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    from tracer.cli import build_parser
    from tracer.completion import parse_shell, script

    shell = parse_shell(args.shell)
    print(script(build_parser(), shell), end="")
    return 0
