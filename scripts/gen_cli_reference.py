"""docs/cli.md from tracer's own argparse parsers: every command and subcommand with its description,
usage, arguments and examples (tracer/helptext.py). tests/test_docs.py fails when docs/cli.md is stale.

    python scripts/gen_cli_reference.py            # rewrite docs/cli.md
    python scripts/gen_cli_reference.py --check    # exit 1 when docs/cli.md differs from what this makes
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "cli.md"
WIDTH = "100"  # usage lines are wrapped at the terminal's width: fixed here so the file is the same everywhere
HEADER = """# CLI reference

Generated from tracer's argument parsers by `python scripts/gen_cli_reference.py`; do not edit by
hand (`tests/test_docs.py` fails when this page is stale). `tracer COMMAND --help` prints the same.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(action.option_strings) or action.metavar or action.dest
        metavar = "" if action.nargs == 0 else f" {formatter._format_args(action, action.dest.upper())}"
        text = formatter._expand_help(action) if action.help else ""
        rows.append(f"| `{name}{metavar if action.option_strings else ''}` | {_cell(text)} |")
    return ["| argument | what it does |", "|---|---|", *rows] if rows else []


def _section(name: str, parser: argparse.ArgumentParser, examples: tuple[str, ...]) -> list[str]:
    from tracer.helptext import subparsers

    out = [f"## tracer {name}".rstrip(), ""]
    if parser.description:
        out += [" ".join(parser.description.split()), ""]
    out += ["```", parser.format_usage().strip(), "```", ""]
    subs = subparsers(parser)
    if subs:
        prefix = f"tracer-{name.replace(' ', '-')}-" if name else "tracer-"
        out += ["Subcommands: " + ", ".join(f"[`{s}`](#{prefix}{s})" for s in subs), ""]
    args = _arguments(parser)
    out += [*args, ""] if args else []
    if examples:
        out += ["Examples:", "", "```bash", *examples, "```", ""]
    return out


def reference() -> str:
    from tracer.cli import build_parser
    from tracer.helptext import HELP, walk

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        lines = [HEADER]
        for name, parser in walk(build_parser()):
            lines += _section(name, parser, HELP.get(name, (None, ()))[1])
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 when docs/cli.md is stale")
    args = p.parse_args(argv)
    text = reference()
    if args.check:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT} is stale: run python scripts/gen_cli_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
