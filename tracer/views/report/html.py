"""One self-contained HTML page: environment, ordering verdicts, sanitizer matrix, timeline and
ablation chart, images embedded, no network; every name from a trace escaped."""
from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tracer.store.atomic import write_text
from tracer.textsafe import shown, shown_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CSS = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}"
       "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
       ".unordered{color:#d62728;font-weight:bold}img{max-width:100%}code{background:#f4f4f4}")


def esc(value: object) -> str:
    """One line of page text: control, format and bidi characters shown escaped (tracer.textsafe: a
    U+202E in a kernel name must not reverse what the page shows, a NUL is no HTML), then HTML-escaped."""
    return html.escape(shown(value))


def esc_text(text: str) -> str:
    """Text of several lines (a <pre>): as esc, its newlines kept."""
    return html.escape(shown_text(text))


@dataclass
class Section:
    title: str
    html: str


@dataclass
class Report:
    title: str
    sections: list[Section] = field(default_factory=list)

    def add_table(self, title: str, header: list[str], rows: Sequence[Sequence[object]], row_class: list[str] | None = None) -> None:
        head = "".join(f"<th>{esc(h)}</th>" for h in header)
        body = "".join(
            f"<tr class='{esc(row_class[i]) if row_class else ''}'>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>"
            for i, r in enumerate(rows))
        self.sections.append(Section(title, f"<table><tr>{head}</tr>{body}</table>"))

    def add_figure(self, title: str, fig: Figure, caption: str = "") -> None:
        import matplotlib.pyplot as plt

        from tracer.views.plots.savefig import savefig

        buf = io.BytesIO()
        savefig(fig, buf, "png")
        plt.close(fig)
        data = base64.b64encode(buf.getvalue()).decode()
        self.sections.append(Section(title, f"<img alt='{esc(title)}' src='data:image/png;base64,{data}'>"
                                            f"<p>{esc_text(caption)}</p>"))

    def add_text(self, title: str, text: str) -> None:
        self.sections.append(Section(title, f"<pre>{esc_text(text)}</pre>"))

    def render(self) -> str:
        parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(self.title)}</title>"
                 f"<style>{CSS}</style></head><body><h1>{esc(self.title)}</h1>"]
        parts += [f"<h2>{esc(s.title)}</h2>{s.html}" for s in self.sections]
        parts.append("</body></html>")
        return "\n".join(parts)

    def write(self, out: Path) -> Path:
        """Written under a temporary name and renamed; nothing is left behind when writing fails."""
        return write_text(out, self.render(), make_folder=False)
