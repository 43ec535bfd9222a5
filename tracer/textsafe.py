"""The one name sanitiser for what tracer prints and draws. Names come from the traced program
(NVTX ranges, kernels, Kineto events, labels, file names, product versions) and reach a terminal:
control characters (ESC clears a screen, CR overwrites a line, a newline forges a verdict line),
C1 controls, format characters (bidi overrides, zero-width characters, invisible tag letters), line
separators and lone surrogates are shown escaped (`\\x1b`, `\\n`, `\\u202e`, `\\U000e0041`), so
every line a view prints is the one it meant. The escaped text is also valid
XML (an SVG's text) and, with `$` escaped, plain text for matplotlib (no mathtext). JSON output
keeps the raw names: json.dumps escapes what JSON needs."""
from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable
from typing import Any, TextIO

_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_SPANS = ((0x0600, 0x0605), (0x0890, 0x0891), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F),
          (0xFFF9, 0xFFFB), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0020, 0xE007F))
# Unicode's format characters (category Cf: bidi overrides, zero-width spaces and joiners, the soft
# hyphen, invisible tag letters) and the line and paragraph separators: invisible, or moving text.
_FORMAT = (0x00AD, 0x061C, 0x06DD, 0x070F, 0x08E2, 0x180E, 0x2028, 0x2029, 0xFEFF, 0x110BD, 0x110CD, 0xE0001,
           *(c for lo, hi in _SPANS for c in range(lo, hi + 1)))


def _table() -> dict[int, str]:
    table = {c: _NAMED.get(c, f"\\x{c:02x}") for c in range(0x20)}
    table.update({c: f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"
                  for c in (*range(0x7F, 0xA0), *_FORMAT, *range(0xD800, 0xE000), 0xFFFE, 0xFFFF)})
    return table


ESCAPES = _table()
KEEP_LINES = {c: s for c, s in ESCAPES.items() if c not in (0x09, 0x0A)}


def shown(name: object) -> str:
    """A name (or any value) as one printable line: every control and direction character escaped."""
    return str(name).translate(ESCAPES)


def shown_text(text: str) -> str:
    """Text of several lines (a message, a log excerpt): escaped as `shown` but its newlines and tabs kept."""
    return text.translate(KEEP_LINES)


def lines_text(lines: Iterable[object]) -> str:
    """A view's lines joined: each element is one line, so a newline inside one (from a name) is escaped."""
    return "\n".join(shown(line) for line in lines)


def drawn(name: object) -> str:
    """A name for matplotlib text: escaped as `shown`, and `$` escaped so it is never read as mathtext."""
    return shown(name).replace("$", "\\$")


class EscapingStream:
    """stdout or stderr as tracer writes them: every write escaped as `shown_text` (JSON stays
    valid: json.dumps never leaves a control character raw, and the others become `\\uXXXX`),
    characters the stream's encoding cannot take written as backslash escapes
    (PYTHONIOENCODING=ascii), and a write the device refuses (a full disk) raised as `failed(exc)`
    once, the stream then pointed at /dev/null so the interpreter's last flush stays quiet (a
    closed pipe is left to cli: `| head` is not an error)."""

    def __init__(self, inner: TextIO, failed: Callable[[OSError], Exception]) -> None:
        self.inner, self.failed = inner, failed

    def write(self, text: str) -> int:
        safe = text.translate(KEEP_LINES)
        try:
            try:
                self.inner.write(safe)
            except UnicodeEncodeError:
                enc = getattr(self.inner, "encoding", None) or "ascii"
                self.inner.write(safe.encode(enc, "backslashreplace").decode(enc))
        except BrokenPipeError:
            raise  # the reader went away (`| head`): cli says nothing and exits 141
        except OSError as exc:
            raise self._gone(exc) from None
        return len(text)

    def flush(self) -> None:
        try:
            self.inner.flush()
        except BrokenPipeError:
            raise  # the reader went away (`| head`): cli says nothing and exits 141
        except OSError as exc:
            raise self._gone(exc) from None

    def _gone(self, exc: OSError) -> Exception:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.inner.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass
        return self.failed(exc)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer...: the stream's own
        return getattr(self.inner, name)
