"""Help: every command and subcommand has a description and two or three examples, and every example
is a command line tracer's own parser accepts (so an example cannot name a flag that is gone)."""
from __future__ import annotations

import shlex

import pytest

from tracer.cli import build_parser, parse, with_default_action
from tracer.helptext import HELP, walk

PARSERS = walk(build_parser())


def test_every_parser_has_help_text() -> None:
    names = {name for name, _ in PARSERS if name}
    assert names == set(HELP), f"without help text: {sorted(names - set(HELP))}; stale: {sorted(set(HELP) - names)}"


@pytest.mark.parametrize("name, parser", [(n, p) for n, p in PARSERS if n], ids=[n for n, _ in PARSERS if n])
def test_description_and_examples(name: str, parser: object) -> None:
    text = parser.format_help()
    examples = [line for line in text.splitlines()[text.splitlines().index("examples:") + 1:] if line.startswith("  ")]
    assert parser.description and len(parser.description) > 20
    assert 2 <= len(examples) <= 3, examples


@pytest.mark.parametrize("example", sorted({e for _, (_, ex) in HELP.items() for e in ex if e.startswith("tracer ")}))
def test_every_example_parses(example: str) -> None:
    words = shlex.split(example)[1:]
    if ">" in words:
        words = words[:words.index(">")]
    if "--" in words:
        words = words[:words.index("--")]
    parser = build_parser()
    args = parse(parser, with_default_action(parser, words))
    assert callable(args.func)
