"""Streaming parsers of compute-sanitizer --xml output: bounded memory however many records, a
truncated file parsed as far as it goes and marked incomplete, hostile XML refused in one line.

Two readers feed the same record handling:
- the default one drives expat (pyexpat) with the C TreeBuilder's methods as its handlers, so no
  Python runs per element; records are taken off the root after each 1 MiB chunk, and the
  <hostStack> subtrees (most of the file, never read) are cut out of the bytes before parsing;
- the reference one (`safe=True`) is defusedxml's pure-Python parser, kept to check the other
  against (tests, scripts/bench_sanitize.py).
Both refuse any DOCTYPE (compute-sanitizer writes none), so no entity is ever declared, expanded
or fetched: billion laughs, quadratic blowup, external entities and DTD retrieval all stop at the
DOCTYPE, before the internal subset is read. The expat reader also refuses entity declarations,
unparsed entities and external references by handler, should a DOCTYPE ever get past.
"""
from __future__ import annotations

import pyexpat
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO
from xml.etree.ElementTree import Element, ParseError, TreeBuilder

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from tracer.errors import TraceFormatError
from tracer.sanitize.model import Finding, Parsed

TOOL_OF_KIND = {"Hazard": "racecheck", "Analysis": "racecheck", "Initcheck": "initcheck", "Synccheck": "synccheck",
                "Precise": "memcheck", "Imprecise": "memcheck", "Leak": "memcheck"}
ROOT = "ComputeSanitizerOutput"
CHUNK = 1 << 20
HOST_OPEN, HOST_CLOSE = b"<hostStack>", b"</hostStack>"
MAX_HOST_STACK = 1 << 20  # a longer span is parsed, not cut, so the carried bytes stay bounded
COUNT = re.compile(r"[0-9]+")
NO_ELEMENTS = pyexpat.errors.codes[pyexpat.errors.XML_ERROR_NO_ELEMENTS]
REFUSED = {"DTDForbidden": "a DOCTYPE", "EntitiesForbidden": "an entity declaration",
           "ExternalReferenceForbidden": "an external reference", "NotSupportedError": "an unsupported construct"}


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
    """The stripped text at a child path like "what/text" (first match at each step: C-speed finds)."""
    found = _find(el, path)
    return (found.text or "").strip() if found is not None else ""


@lru_cache(maxsize=4096)
def file_name(path: str) -> str:
    return Path(path).name


def _where(el: Element, *paths: str) -> tuple[str, str]:
    for p in paths:
        w = _find(el, p)
        if w is not None:
            func = _text(w, "func")
            path, line = _text(w, "path"), _text(w, "line")
            return func, f"{file_name(path)}:{line}" if path and line else path
    return "", ""


def _find(el: Element | None, path: str) -> Element | None:
    for tag in path.split("/"):
        if el is None:
            return None
        el = el.find(tag)
    return el


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
        rows.append((f"{src_dir}-{_text(dest, 'direction').upper() or '?'} race", func, src, level, message, _count(dest)))
    return rows or [(f"{src_dir} race", func, src, level, message, 1)]


class BadRecord(ValueError):
    """A record whose content cannot be counted (the caller names the file and the record)."""


def _count(dest: Element) -> int:
    raw = _text(dest, "count")
    if not raw:
        return 1
    if not COUNT.fullmatch(raw):
        raise BadRecord(f"<count> {raw[:40]!r} is not a whole number of hazards (allowed: 0, 1, 2, ...)")
    return int(raw)


@dataclass
class _Progress:
    root: bool = False  # the root element was seen: a later parse error is a truncation, not a foreign file


class _Refused(Exception):
    """A DOCTYPE, entity declaration or external reference met by the expat reader."""


def _refuse(what: str):  # type: ignore[no-untyped-def]
    def handler(*_: object) -> None:
        raise _Refused(what)
    return handler


def _expat(builder: TreeBuilder) -> pyexpat.XMLParserType:
    p = pyexpat.ParserCreate()
    p.buffer_text = True
    p.SetParamEntityParsing(pyexpat.XML_PARAM_ENTITY_PARSING_NEVER)
    p.StartDoctypeDeclHandler = _refuse("a DOCTYPE")
    p.EntityDeclHandler = _refuse("an entity declaration")
    p.UnparsedEntityDeclHandler = _refuse("an unparsed entity declaration")
    p.ExternalEntityRefHandler = _refuse("an external reference")
    p.EndElementHandler = builder.end
    p.CharacterDataHandler = builder.data
    return p


def _chunks(fh: BinaryIO) -> Iterator[bytes]:
    while data := fh.read(CHUNK):
        yield data


class _HostStackCutter:
    """The file's bytes less each <hostStack>...</hostStack> span (most of the file; nothing reads
    them), cut only where cutting cannot change what the parser sees of the rest:
    - after the root's start tag, behind a prolog that is at most the XML declaration;
    - never once a comment, CDATA section or processing instruction has appeared (`<!`, `<?`, `?>`,
      `]]>`; their bytes `!`, `?`, `]` are looked for first, at memchr speed): cutting could end one;
    - not a span holding another <hostStack>, a `record` or the root's end tag: in a malformed or
      interleaved file that would hide what the parser must see (it is parsed instead);
    - a span longer than MAX_HOST_STACK is parsed, so what is carried between chunks stays bounded."""

    PROLOG = re.compile(rb"(?:\xef\xbb\xbf)?(?:<\?xml[^<>?]*\?>)?\s*")
    OPEN_ROOT, CLOSE_ROOT = b"<" + ROOT.encode() + b">", b"</" + ROOT.encode()
    MARKUP = (b"<!", b"<?", b"?>", b"]]>")

    def __init__(self) -> None:
        self.cutting = True
        self.started = False  # the root's start tag has gone by

    def chunks(self, fh: BinaryIO) -> Iterator[bytes]:
        carry = b""
        while True:
            data = fh.read(CHUNK)
            buf = carry + data
            if not self.cutting or not self._may_cut(buf):
                carry = b""
                yield buf
            else:
                out, carry = self._cut(buf, final=not data)
                yield out
            if not data:
                return

    def _may_cut(self, buf: bytes) -> bool:
        start = 0
        if not self.started:
            at = buf.find(self.OPEN_ROOT)
            if at < 0:
                self.cutting = False  # no root start tag in the first chunk: not the tool's layout
                return False
            self.started, start = True, at + len(self.OPEN_ROOT)
            self.cutting = self.PROLOG.fullmatch(buf, 0, at) is not None
        if self.cutting and (b"!" in buf or b"?" in buf or b"]" in buf):
            self.cutting = not any(buf.find(t, start) >= 0 for t in self.MARKUP)
        return self.cutting

    def _cut(self, buf: bytes, final: bool) -> tuple[bytes, bytes]:
        out, pos = [], 0
        i = buf.find(HOST_OPEN)
        while i >= 0 and (j := buf.find(HOST_CLOSE, i)) >= 0:
            k = buf.find(HOST_OPEN, i + len(HOST_OPEN))
            plain = not (0 <= k < j or buf.find(b"record", i, j) >= 0 or buf.find(self.CLOSE_ROOT, i, j) >= 0)
            out.append(buf[pos:i] if plain else buf[pos:j + len(HOST_CLOSE)])
            pos = j + len(HOST_CLOSE)
            i = k if k < 0 or k >= pos else buf.find(HOST_OPEN, pos)
        if final:
            keep = len(buf)
        elif 0 <= i and len(buf) - i < MAX_HOST_STACK:
            keep = i  # an unfinished span: carried into the next chunk
        else:
            keep = max(pos, len(buf) - len(HOST_OPEN) + 1)
        out.append(buf[pos:keep])
        return b"".join(out), buf[keep:]


def _take(root: Element, keep_last: bool) -> list[Element]:
    """Detach the root's finished children (all but the last while the parse goes on): the records
    among them (other children are no records, as in the reference)."""
    n = len(root) - (1 if keep_last else 0)
    if n <= 0:
        return []
    done = root[:n]
    del root[:n]
    return [el for el in done if el.tag == "record"]


def _last_open(builder: TreeBuilder, root: Element) -> bool:
    """After a parse error: whether the root's last child was still open (so never finished)."""
    last = root[-1] if len(root) else None
    try:
        while (el := builder.end("")) is not root:
            if el is last:
                return True
    except IndexError:  # the root itself was closed
        pass
    return False


def _fast_records(path: Path, host_stacks: bool, progress: _Progress) -> Iterator[Element]:
    builder = TreeBuilder()
    p = _expat(builder)
    root: list[Element] = []

    def first(name: str, attrs: dict[str, str]) -> None:
        if name != ROOT:
            raise TraceFormatError(f"{path}: not compute-sanitizer XML (root element <{name}>)")
        root.append(builder.start(name, attrs))
        progress.root = True
        p.StartElementHandler = builder.start

    p.StartElementHandler = first
    with open(path, "rb") as fh:
        try:
            for chunk in _chunks(fh) if host_stacks else _HostStackCutter().chunks(fh):
                p.Parse(chunk, False)
                if root:
                    yield from _take(root[0], keep_last=True)
            p.Parse(b"", True)
        except pyexpat.ExpatError:
            if root:  # the records finished before the error, as the reference yields them
                yield from _take(root[0], keep_last=_last_open(builder, root[0]))
            raise
    if root:
        yield from _take(root[0], keep_last=False)


def _safe_records(path: Path, progress: _Progress) -> Iterator[Element]:
    """The reference reader: defusedxml's parser, start and end events, children of the root only."""
    root: Element | None = None
    depth = 0
    for event, el in iterparse(str(path), events=("start", "end"), forbid_dtd=True):
        if event == "start":
            if root is None:
                if el.tag != ROOT:
                    raise TraceFormatError(f"{path}: not compute-sanitizer XML (root element <{el.tag}>)")
                root, progress.root = el, True
            depth += 1
            continue
        depth -= 1
        if depth == 1 and root is not None:
            if el.tag == "record":
                yield el
            root.remove(el)


class _Records:
    """What the records of one file add up to."""

    def __init__(self, tool: str | None) -> None:
        self.grouper: Grouper | None = Grouper(tool) if tool else None
        self.tool = tool
        self.tool_errors: list[str] = []
        self.seen = 0

    def add(self, rec: Element) -> None:
        self.seen += 1
        kind = _text(rec, "kind")
        if kind == "Sanitizer":  # the tool's own failure, not a finding
            self.tool_errors.append(_text(rec, "what/text"))
            return
        if self.grouper is None:
            self.grouper = Grouper(TOOL_OF_KIND.get(kind, "memcheck"))
        for row in classify(rec):
            self.grouper.add(*row)

    def parsed(self, incomplete: bool, recognised: bool) -> Parsed:
        g = self.grouper or Grouper(self.tool or "unknown")
        return Parsed(g.findings(), g.records, incomplete, tool_errors=tuple(self.tool_errors), recognised=recognised)


def parse_xml(path: Path, tool: str | None = None, *, safe: bool = False, host_stacks: bool = False) -> Parsed:
    """Findings of one XML file. `safe`: the defusedxml reader (same result, several times slower);
    `host_stacks`: parse the host-stack subtrees too instead of cutting them out (nothing reads them)."""
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    progress = _Progress()
    records = _safe_records(path, progress) if safe else _fast_records(path, host_stacks, progress)
    acc = _Records(tool)
    try:
        for rec in records:
            acc.add(rec)
    except (ParseError, pyexpat.ExpatError) as exc:
        if not progress.root and getattr(exc, "code", None) != NO_ELEMENTS:
            raise TraceFormatError(f"{path}: not compute-sanitizer XML ({exc})") from None
        return acc.parsed(True, progress.root)  # empty, truncated or malformed: as far as it goes
    except (_Refused, DefusedXmlException) as exc:
        what = str(exc) if isinstance(exc, _Refused) else REFUSED.get(type(exc).__name__, type(exc).__name__)
        raise TraceFormatError(f"{path}: refused: the file holds {what} (compute-sanitizer XML has no DOCTYPE; "
                               "entities are never expanded or fetched)") from None
    except BadRecord as exc:
        raise TraceFormatError(f"{path}: record {acc.seen}: {exc}") from None
    return acc.parsed(False, True)
