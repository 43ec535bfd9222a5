"""Streaming parsers of compute-sanitizer --xml output: bounded memory however many records, a
truncated file parsed as far as it goes and marked incomplete, hostile XML refused in one line.

Three readers, one record handling (`_meaning` of a record, `_Records` adding them up):
- the scanning one (the default, `XmlReader.SCAN`, see `_Scan`): host stacks cut out of the bytes
  (xml_bytes.HostStackCutter), records split at their tags, and a record is checked by expat, built
  (C TreeBuilder) and classified only when no record before it was the same but for the numbers of
  elements nothing reads (addresses, thread indices...: xml_bytes.IGNORED); every other record is
  counted from its bytes alone. Asked to (`workers=2`: the benchmark, never a command, since
  readers start no process), files of SPLIT_BYTES or more are read in two halves at once, the
  second by a forked worker process. Anything off the plain layout (a comment, CDATA section,
  processing instruction or DOCTYPE, another child of the root, a record expat refuses) makes it
  give up and the tree reader read the file instead, so what it reports never depends on it;
- the tree reader (`XmlReader.TREE`, the default before): expat drives the C TreeBuilder's methods
  as its handlers, records taken off the root after each 1 MiB chunk, host stacks cut out;
- the reference (`XmlReader.SAFE`): defusedxml's pure-Python parser, kept to check the others
  against (tests, scripts/bench_sanitize.py).
All refuse any DOCTYPE (compute-sanitizer writes none), so no entity is ever declared, expanded or
fetched: billion laughs, quadratic blowup, external entities and DTD retrieval all stop at the
DOCTYPE, before the internal subset is read. The expat readers also refuse entity declarations,
unparsed entities and external references by handler, should a DOCTYPE ever get past.
"""
from __future__ import annotations

import os
import pyexpat
import re
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from typing import Any, BinaryIO, cast
from xml.etree.ElementTree import Element, ParseError, TreeBuilder

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from tracer.errors import TraceFormatError
from tracer.sanitize import xml_bytes as xb
from tracer.sanitize.model import Finding, Parsed
from tracer.sanitize.tools import FALLBACK, TOOL_OF_KIND

ROOT = xb.ROOT
COUNT = re.compile(r"[0-9]+")
NO_ELEMENTS = pyexpat.errors.codes[pyexpat.errors.XML_ERROR_NO_ELEMENTS]
REFUSED = {"DTDForbidden": "a DOCTYPE", "EntitiesForbidden": "an entity declaration",
           "ExternalReferenceForbidden": "an external reference", "NotSupportedError": "an unsupported construct"}
SPLIT_BYTES = 64 << 20  # with workers=2, files this large are read in two halves at once
MEMO_BYTES = 32 << 20  # record keys and meanings the scanning reader remembers (then it starts afresh)
MEANING_BYTES = 512  # about what one remembered meaning costs


class XmlReader(str, Enum):
    SCAN = "scan"  # the default: records split from the bytes, each kind of record checked and classified once
    TREE = "tree"  # expat + C TreeBuilder, one element tree per record (the default before)
    SAFE = "safe"  # defusedxml, the reference


class Grouper:
    """Accumulates raw records into Findings keyed by (tool, kind, kernel, source)."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.groups: dict[tuple[str, str, str, str], list[Any]] = {}
        self.records = 0

    def add(self, kind: str, kernel: str, source: str, level: str, message: str, hazards: int = 1, times: int = 1) -> None:
        self.records += times
        key = (kind, kernel, source, level)
        g = self.groups.get(key)
        if g is None:
            self.groups[key] = [times, hazards * times, message]
        else:
            g[0] += times
            g[1] += hazards * times

    def merge(self, later: Grouper) -> None:
        """Add the groups of records that came after this one's (each group keeps its first message)."""
        self.records += later.records
        for key, (n, hz, message) in later.groups.items():
            g = self.groups.get(key)
            if g is None:
                self.groups[key] = [n, hz, message]
            else:
                g[0] += n
                g[1] += hz

    def findings(self) -> tuple[Finding, ...]:
        out = [Finding(tool=self.tool, kind=k, kernel=kern, source=src, count=n, hazards=hz, level=lvl, message=msg) for (k, kern, src, lvl),
               (n, hz, msg) in self.groups.items()]
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


def _refuse(what: str):  # type: ignore[no-untyped-def]  # an expat handler taking whatever arguments the event has
    def handler(*_: object) -> None:
        raise _Refused(what)
    return handler


def _expat(builder: TreeBuilder | None) -> pyexpat.XMLParserType:
    """An expat parser that refuses DOCTYPEs and entities, building into `builder` (None: checking only)."""
    p = pyexpat.ParserCreate()
    p.buffer_text = True
    p.SetParamEntityParsing(pyexpat.XML_PARAM_ENTITY_PARSING_NEVER)
    p.StartDoctypeDeclHandler = _refuse("a DOCTYPE")
    p.EntityDeclHandler = _refuse("an entity declaration")
    p.UnparsedEntityDeclHandler = _refuse("an unparsed entity declaration")
    p.ExternalEntityRefHandler = _refuse("an external reference")
    if builder is not None:
        p.EndElementHandler = builder.end
        p.CharacterDataHandler = builder.data
    return p


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


def _chunks(fh: BinaryIO) -> Iterator[bytes]:
    while data := fh.read(xb.CHUNK):
        yield data


def _tree_records(path: Path, host_stacks: bool, progress: _Progress) -> Iterator[Element]:
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
            for chunk in _chunks(fh) if host_stacks else xb.HostStackCutter().chunks(fh):
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


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: the scanning reader counts them
class _Meaning:
    """What one record says: its kind and rows, or the tool's own failure, or why it cannot be counted."""

    kind: str
    rows: tuple[Row, ...] = ()
    tool_error: str | None = None  # a "Sanitizer" record: the tool's own failure, not a finding
    bad: str | None = None  # a BadRecord's message


def _meaning(rec: Element) -> _Meaning:
    kind = _text(rec, "kind")
    if kind == "Sanitizer":
        return _Meaning(kind, tool_error=_text(rec, "what/text"))
    try:
        return _Meaning(kind, tuple(classify(rec)))
    except BadRecord as exc:
        return _Meaning(kind, bad=str(exc))


class _Records:
    """What the records of one file (or of one part of it, in order) add up to."""

    def __init__(self, tool: str | None) -> None:
        self.grouper: Grouper | None = Grouper(tool) if tool else None
        self.tool = tool
        self.tool_errors: list[str] = []
        self.seen = 0

    def add(self, m: _Meaning, times: int = 1) -> None:
        """`times` records that all mean `m`, one after the other."""
        if m.bad is not None:
            self.seen += 1
            raise BadRecord(m.bad)
        self.seen += times
        if m.tool_error is not None:
            self.tool_errors.extend([m.tool_error] * times)
            return
        if self.grouper is None:
            self.grouper = Grouper(TOOL_OF_KIND.get(m.kind, FALLBACK).value)
        for row in m.rows:
            self.grouper.add(*row, times=times)

    def merge(self, later: _Records) -> None:
        self.seen += later.seen
        self.tool_errors += later.tool_errors
        if self.grouper is None:  # no tool given and no finding yet: the later part's first record names it
            self.grouper = later.grouper
        elif later.grouper is not None:
            self.grouper.merge(later.grouper)

    def parsed(self, incomplete: bool, recognised: bool) -> Parsed:
        g = self.grouper or Grouper(self.tool or "unknown")
        return Parsed(findings=g.findings(), records=g.records, incomplete=incomplete, tool_errors=tuple(self.tool_errors), recognised=recognised)


class _Scan:
    """The scanning reader over bytes [start, end) of a file (host stacks cut): records split at
    their tags, and a record is built and classified (C TreeBuilder, after expat has checked it
    whole) only when no record before it had the same key and the same significant digits
    (xml_bytes.keys_of, xml_bytes.significant): any other differs from one so checked only in the
    digits of elements nothing reads, so it is as well-formed and means the same. Raises NotPlain
    where it cannot prove it reads as the tree reader does."""

    def __init__(self, path: Path, prolog: bytes, tool: str | None) -> None:
        self.path, self.prolog = path, prolog
        self.acc = _Records(tool)
        self.memo: dict[bytes, tuple[Callable[[bytes], object], dict[object, _Meaning]]] = {}
        self.memo_bytes = 0

    def run(self, start: int, end: int, final: bool) -> bool:
        """Read [start, end), the whole rest of the file when `final`; whether it was truncated."""
        cutter, split = xb.HostStackCutter(started=start > 0), xb.RecordSplitter(head=start == 0)
        p = _expat(None)  # checks what lies around the records: the prolog, the root's tags, the rest
        _check(p, self.prolog + xb.OPEN_ROOT, False)
        with open(self.path, "rb") as fh:
            fh.seek(start)
            for chunk in cutter.chunks(fh, end - start):
                if not cutter.cutting:
                    raise xb.NotPlain("a comment, CDATA section, processing instruction or DOCTYPE")
                self.add(*split.feed(chunk))
        if not final:  # the first half of a split file ends right before a record
            if split.rest().strip(xb.WS):
                raise xb.NotPlain("the first half does not end between records")
            return False
        if not split.rest_is_whole():
            raise xb.NotPlain("a record after the last </record>")
        try:
            p.Parse(split.rest(), True)
        except pyexpat.ExpatError:
            return True  # the records before were all finished: they count, as in the reference
        return False

    def add(self, pieces: list[bytes], keys: list[bytes]) -> None:
        known = self.memo.get
        found: list[_Meaning | None] = []
        for piece, key in zip(pieces, keys):  # the loop run once per record: kept to the bone
            entry = known(key)
            found.append(entry[1].get(entry[0](piece)) if entry is not None else None)
        if None in found:
            self._learn(pieces, keys, found)
        meanings = cast("list[_Meaning]", found)  # _learn filled every None
        counts = Counter(meanings)
        if any(m.bad is not None or m.tool_error is not None for m in counts):
            for m in meanings:  # in order: a bad record's number, the tool's errors in sequence
                self.acc.add(m)
        else:
            for m, n in counts.items():  # first seen first: groups keep the order and message of their first record
                self.acc.add(m, n)

    def _learn(self, pieces: list[bytes], keys: list[bytes], found: list[_Meaning | None]) -> None:
        """Check, build and classify the records not known yet (one of each kind, all in one
        parse) and fill them in."""
        if self.memo_bytes > MEMO_BYTES:
            self.memo.clear()
            self.memo_bytes = 0
        new: dict[tuple[bytes, object], list[int]] = {}
        for i, m in enumerate(found):
            if m is None:
                entry = self.memo.get(keys[i]) or self._entry(keys[i])
                new.setdefault((keys[i], entry[0](pieces[i])), []).append(i)
        builder = TreeBuilder()
        p = _expat(builder)
        p.StartElementHandler = builder.start
        records = [pieces[at[0]] for at in new.values()]
        _check(p, self.prolog + b"<r>" + xb.CLOSE_RECORD.join(records) + xb.CLOSE_RECORD + b"</r>", True)
        built = builder.close()
        if len(built) != len(new) or any(r.tag != "record" for r in built):
            raise xb.NotPlain("a record that is not one element")
        for ((key, digits), at), rec in zip(new.items(), built):
            m = self.memo[key][1][digits] = _meaning(rec)
            for i in at:
                found[i] = m
        self.memo_bytes += MEANING_BYTES * len(new)

    def _entry(self, key: bytes) -> tuple[Callable[[bytes], object], dict[object, _Meaning]]:
        entry = self.memo[key] = (_digits_at(xb.significant(key)), {})
        self.memo_bytes += len(key)
        return entry


def _digits_at(where: tuple[slice, ...]) -> Callable[[bytes], object]:
    """The bytes at `where` of a record (all at once, in C)."""
    return itemgetter(*where) if where else _nothing


def _nothing(_: bytes) -> object:
    return None


def _check(p: pyexpat.XMLParserType, data: bytes, final: bool) -> None:
    try:
        p.Parse(data, final)
    except pyexpat.ExpatError as exc:
        raise xb.NotPlain(f"parse error: {exc}") from None


def _scan_part(path: str, prolog: bytes, tool: str | None, start: int, end: int) -> tuple[_Records, bool] | None:
    """The second half of a split file, in a worker process: its records and whether it was
    truncated, or None where the scan gave up or failed (the caller then reads the file alone)."""
    scan = _Scan(Path(path), prolog, tool)
    try:
        truncated = scan.run(start, end, final=True)
    except Exception:  # anything, a bad record included: the caller's sequential read says what
        return None
    return scan.acc, truncated


def _scan_file(path: Path, tool: str | None, workers: int | None) -> tuple[_Records, bool] | None:
    """The scanning reader over the whole file, in two halves at once where that pays; None when
    the file is not in the plain layout (the tree reader then reads it). BadRecord propagates."""
    size = path.stat().st_size
    method = _start_method(size, workers)
    with open(path, "rb") as fh:
        prolog = xb.prolog_of(fh.read(xb.CHUNK))
        at = xb.split_point(fh, size) if prolog is not None and method else None
    if prolog is None:
        return None
    if at is not None and method:
        both = _scan_halves(path, prolog, tool, at, method)
        if both is not None:
            return both
    scan = _Scan(path, prolog, tool)
    try:
        return scan.acc, scan.run(0, size, final=True)
    except xb.NotPlain:
        return None
    except BadRecord as exc:
        raise BadRecord(f"record {scan.acc.seen}: {exc}") from None


def _start_method(size: int, workers: int | None) -> str | None:
    """How to start the second reader, or None to read in this process alone: forked (cheap to
    start, and no main module run again) from a process with one thread, so no lock is inherited held."""
    import threading

    if workers != 2 or size < SPLIT_BYTES or _cpus() < 2:
        return None
    import multiprocessing

    return "fork" if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1 else None


def _cpus() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def _scan_halves(path: Path, prolog: bytes, tool: str | None, at: int, method: str) -> tuple[_Records, bool] | None:
    """The first half here and the second in a worker process; None when either gave up. The
    worker needs nothing inherited (it runs under the spawn start method too)."""
    import multiprocessing

    ctx = multiprocessing.get_context(method)
    receive, send = ctx.Pipe(duplex=False)
    worker = ctx.Process(target=_worker, args=(send, str(path), prolog, tool, at, path.stat().st_size), daemon=True)  # type: ignore[attr-defined]  # typeshed's BaseContext lacks Process; every real context has it
    worker.start()
    send.close()
    try:
        first = _Scan(path, prolog, tool)
        first.run(0, at, final=False)
        second = receive.recv()
    except (xb.NotPlain, BadRecord, EOFError):
        return None
    finally:
        if worker.is_alive():
            worker.terminate()
        worker.join()
        receive.close()
    if second is None:
        return None
    first.acc.merge(second[0])
    return first.acc, second[1]


def _worker(send, path: str, prolog: bytes, tool: str | None, start: int, end: int) -> None:  # type: ignore[no-untyped-def]  # send is a multiprocessing Connection, untyped in this context
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends this process
    send.send(_scan_part(path, prolog, tool, start, end))
    send.close()


def parse_xml(path: Path, tool: str | None = None, *, reader: XmlReader = XmlReader.SCAN, host_stacks: bool = False,
              workers: int | None = None) -> Parsed:
    """Findings of one XML file, the same whichever the reader (see the module's docstring);
    `host_stacks`: the tree reader, parsing the host-stack subtrees too instead of cutting them out;
    `workers`: 1 or None (default) reads in this process only, 2 splits files of SPLIT_BYTES or
    more over a forked worker when two CPUs are there (scripts/bench_sanitize.py measures it)."""
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    if workers not in (None, 1, 2):
        raise ValueError(f"workers={workers!r}: allowed 1, 2 or None")
    try:
        if reader is XmlReader.SCAN and not host_stacks:
            scanned = _scan_file(path, tool, workers)
            if scanned is not None:
                return scanned[0].parsed(scanned[1], True)
        return _read(path, tool, reader, host_stacks)
    except BadRecord as exc:
        raise TraceFormatError(f"{path}: {exc}") from None


def _read(path: Path, tool: str | None, reader: XmlReader, host_stacks: bool) -> Parsed:
    """The tree or reference reader: records as elements, one at a time."""
    acc, progress = _Records(tool), _Progress()
    records = _safe_records(path, progress) if reader is XmlReader.SAFE else _tree_records(path, host_stacks, progress)
    try:
        for rec in records:
            try:
                acc.add(_meaning(rec))
            except BadRecord as exc:
                raise BadRecord(f"record {acc.seen}: {exc}") from None
    except (ParseError, pyexpat.ExpatError) as exc:
        if not progress.root and getattr(exc, "code", None) != NO_ELEMENTS:
            raise TraceFormatError(f"{path}: not compute-sanitizer XML ({exc})") from None
        return acc.parsed(True, progress.root)  # empty, truncated or malformed: as far as it goes
    except (_Refused, DefusedXmlException) as exc:
        what = str(exc) if isinstance(exc, _Refused) else REFUSED.get(type(exc).__name__, type(exc).__name__)
        raise TraceFormatError(f"{path}: refused: the file holds {what} (compute-sanitizer XML has no DOCTYPE; "
                               "entities are never expanded or fetched)") from None
    return acc.parsed(False, True)
