"""Colour for a person at a terminal: UNORDERED pairs, hazards, sanitizer findings and warnings
stand out. Only where stdout is a terminal and NO_COLOR (no-color.org) is unset; piped or
redirected output, and every --json, stay plain text. The words are the ones the text views print
(tracer/views/trace_text.py, tracer/analysis/hazards.py, tracer/sanitize/report.py); nothing is reworded."""
from __future__ import annotations

from functools import cache, partial

import os
import re
from collections.abc import Callable, Mapping
from typing import TextIO

RED, YELLOW, GREEN, BOLD, RESET = "\033[31m", "\033[33m", "\033[32m", "\033[1m", "\033[0m"
# (pattern, colour): the first group of each match is coloured, in this order
RULES: tuple[tuple[str, str], ...] = (
    (r"(?<!\b0 )\b(UNORDERED)\b(?!: 0 )", BOLD + RED),
    (r"^(hazards: [1-9][\d,]*)", BOLD + RED),
    (r"^  ((?:RAW|WAR|WAW|reuse)(?: \(may\))?) ", RED),
    (r"\b(tool-failed|timeout|target-failed|errors|incomplete|no-errors-recorded)\b(?= +\d)", BOLD + RED),
    (r"\b(clean)\b(?= +0 )", GREEN),
    (r"^(warning:)", YELLOW),
)


@cache
def _compiled() -> tuple[tuple[re.Pattern[str], str], ...]:
    """RULES compiled on the first coloured line (start-up: every command imports this module and
    most never colour, piped or redirected; issue 27)."""
    return tuple((re.compile(rx), code) for rx, code in RULES)


def wanted(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Colour on this stream: a terminal, NO_COLOR unset or empty, TERM not dumb."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _coloured(m: re.Match[str], code: str) -> str:
    return m.group(0).replace(m.group(1), f"{code}{m.group(1)}{RESET}", 1)


def colour_line(line: str) -> str:
    for rx, code in _compiled():
        line = rx.sub(partial(_coloured, code=code), line)
    return line


def colour(text: str) -> str:
    return "\n".join(colour_line(line) for line in text.split("\n"))


class ColourStream:
    """stdout at a terminal: colour added line by line when `coloured` (the text is left as it is
    otherwise), and `before_output` called once before the first write (to take a spinner away)."""

    def __init__(self, inner: TextIO, coloured: bool, before_output: Callable[[], None] = lambda: None) -> None:
        self.inner, self.pending, self.coloured, self.before_output = inner, "", coloured, before_output

    def write(self, text: str) -> int:
        self.before_output()
        if not self.coloured:
            return self.inner.write(text)
        self.pending += text
        done, _, self.pending = self.pending.rpartition("\n")
        if _:
            self.inner.write(colour(done) + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.inner.write(colour(self.pending))
            self.pending = ""
        self.inner.flush()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)
