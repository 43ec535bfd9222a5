"""Every figure tracer draws is saved through `savefig` here: names from the traced program are
drawn as plain text (matplotlib's mathtext off, so `$\\frac{$` is a name, not a parse error) and
escaped as the terminal views escape them (tracer.textsafe: a NUL or ESC in a kernel name shows
as `\\x00`, and an SVG stays valid XML)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

import matplotlib
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FuncFormatter

from tracer.textsafe import lines_text


def shown_text(text: str) -> str:
    """Drawn text: its lines kept, everything else escaped (a tab has no glyph either)."""
    return lines_text(text.split("\n"))


def plain_text(fig: Figure) -> None:
    """Every text of the figure, and the tick labels still to be made from fixed labels, made plain."""
    for t in fig.findobj(Text):
        t.set_parse_math(False)
        text = t.get_text()
        safe = shown_text(text)
        if safe != text:
            t.set_text(safe)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for fmt in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(fmt, FixedFormatter):
                    fmt.seq = [shown_text(str(s)) for s in fmt.seq]
                elif isinstance(fmt, FuncFormatter) and not getattr(fmt.func, "plain", False):  # set_ticks(labels=...)
                    fmt.func = _plain(fmt.func)


def _plain(func: Callable[[float, int | None], object]) -> Callable[[float, int | None], str]:
    def label(x: float, pos: int | None = None) -> str:
        return shown_text(str(func(x, pos)))

    label.plain = True  # type: ignore[attr-defined]  # a mark on the function: wrapped once
    return label


@contextmanager
def plain_drawing(fig: Figure) -> Iterator[None]:
    """Draw (or lay out) the figure inside: its texts plain, and those made while drawing too."""
    plain_text(fig)
    with matplotlib.rc_context({"text.parse_math": False}):
        yield


def savefig(fig: Figure, target: str | IO[bytes], fmt: str) -> None:
    with plain_drawing(fig):
        fig.savefig(target, format=fmt)
