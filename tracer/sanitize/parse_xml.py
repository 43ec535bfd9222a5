"""Streaming parser of compute-sanitizer --xml output (defusedxml): bounded memory however many
records, and a truncated file parsed as far as it goes and marked incomplete."""
from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import Element, ParseError

from defusedxml.ElementTree import iterparse

from tracer.errors import TraceFormatError
from tracer.sanitize.model import Finding, Parsed

TOOL_OF_KIND = {"Hazard": "racecheck", "Analysis": "racecheck", "Initcheck": "initcheck", "Synccheck": "synccheck",
                "Precise": "memcheck", "Imprecise": "memcheck", "Leak": "memcheck"}


class Grouper:
    """Accumulates raw records into Findings keyed by (tool, kind, kernel, source)."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.groups: dict[tuple[str, str, str, str], list] = {}
        self.records = 0

    def add(self, kind: str, kernel: str, source: str, level: str, message: str, hazards: int = 1) -> None:
        self.records += 1
        key = (kind, kernel, source, level)
        g = self.groups.get(key)
        if g is None:
            self.groups[key] = [1, hazards, message]
        else:
            g[0] += 1
            g[1] += hazards

    def findings(self) -> tuple[Finding, ...]:
        out = [Finding(self.tool, k, kern, src, n, hz, lvl, msg) for (k, kern, src, lvl), (n, hz, msg) in self.groups.items()]
        return tuple(sorted(out, key=lambda f: (-f.count, f.kind, f.kernel, f.source)))


def _text(el: Element | None, path: str) -> str:
    if el is None:
        return ""
    found = el.find(path)
    return (found.text or "").strip() if found is not None else ""


def _where(el: Element, *paths: str) -> tuple[str, str]:
    for p in paths:
        w = el.find(p)
        if w is not None:
            func = _text(w, "func")
            path, line = _text(w, "path"), _text(w, "line")
            return func, f"{Path(path).name}:{line}" if path and line else path
    return "", ""


Row = tuple[str, str, str, str, str, int]  # kind, kernel, source, level, message, hazards


def classify(rec: Element) -> list[Row]:
    """The findings in one <record> (a racecheck analysis record holds one per destination)."""
    kind = _text(rec, "kind")
    what = rec.find("what")
    message = _text(what, "text")
    level = (_text(rec, "level") or ("warning" if "Warning" in message else "error")).lower()
    if kind == "Api":
        return [("api error", _text(what, "api"), _text(what, "error"), level, message, 1)]
    if kind == "Hazard":
        htype = _text(what, "common/type") or "unknown"
        func, src = _where(what, "thread0/where", "thread1/where") if what is not None else ("", "")
        return [(f"{htype} hazard", func, src, level, message, 1)]
    if kind == "Analysis" and what is not None:
        return _analysis(what, level, message)
    func, src = _where(rec, "where", "what/where")
    if kind == "Synccheck":
        detail = _text(what, "type")
        return [(f"barrier error ({detail.lower()})" if detail else "barrier error", func, src, level, message, 1)]
    if kind == "Initcheck":
        return [("uninitialized read" if "read" in message.lower() else "uninitialized access", func, src, level, message, 1)]
    if kind in ("Precise", "Imprecise"):
        err = _text(what, "error") or "memory error"
        return [(f"{err} {_text(what, 'direction')}".strip(), func, src, level, message, 1)]
    return [(kind.lower() or "record", func, src, level, message, 1)]


def _analysis(what: Element, level: str, message: str) -> list[Row]:
    """racecheck --racecheck-report analysis: one source access, hazards counted per destination."""
    source = what.find("source")
    src_dir = _text(source, "direction").upper() or "?"
    func, src = _where(source, "where") if source is not None else ("", "")
    rows = []
    for dest in what.findall("destination"):
        hazards = int(_text(dest, "count") or 1)
        rows.append((f"{src_dir}-{_text(dest, 'direction').upper() or '?'} race", func, src, level, message, hazards))
    return rows or [(f"{src_dir} race", func, src, level, message, 1)]


def parse_xml(path: Path, tool: str | None = None) -> Parsed:
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    grouper: Grouper | None = Grouper(tool) if tool else None
    incomplete = False
    tool_errors: list[str] = []
    root_seen = False
    try:
        for event, el in iterparse(str(path), events=("start", "end")):
            if event == "start":
                if not root_seen and el.tag != "ComputeSanitizerOutput":
                    raise TraceFormatError(f"{path}: not compute-sanitizer XML (root element <{el.tag}>)")
                root_seen = True
                continue
            if el.tag != "record":
                continue
            if _text(el, "kind") == "Sanitizer":  # the tool's own failure, not a finding
                tool_errors.append(_text(el, "what/text"))
                el.clear()
                continue
            if grouper is None:
                grouper = Grouper(TOOL_OF_KIND.get(_text(el, "kind"), "memcheck"))
            for row in classify(el):
                grouper.add(*row)
            el.clear()
    except ParseError as exc:
        if path.stat().st_size == 0:
            return Parsed((), 0, True)
        if not root_seen:
            raise TraceFormatError(f"{path}: not compute-sanitizer XML ({exc})") from exc
        incomplete = True
    g = grouper or Grouper(tool or "unknown")
    return Parsed(g.findings(), g.records, incomplete, tool_errors=tuple(tool_errors))
