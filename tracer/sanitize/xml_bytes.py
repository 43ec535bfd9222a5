"""Byte-level work on compute-sanitizer XML before any parser sees it: the host-stack cutter, the
scanning reader's record splitter and record keys, and where a file splits in two.

Nothing here decides what a file means. Every function either proves from the bytes that what it
does cannot change what the parser sees of the rest (plain layout: a prolog that is at most the XML
declaration, then the root's start tag, then records, with no comment, CDATA section, processing
instruction or DOCTYPE), or gives up (`NotPlain`), and the caller reads the file the slow way.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from operator import methodcaller
from typing import BinaryIO

ROOT = "ComputeSanitizerOutput"
OPEN_ROOT, CLOSE_ROOT = b"<" + ROOT.encode() + b">", b"</" + ROOT.encode()
CHUNK = 1 << 20
HOST_OPEN, HOST_CLOSE = b"<hostStack>", b"</hostStack>"
MAX_HOST_STACK = 1 << 20  # a longer span is parsed, not cut, so the carried bytes stay bounded
OPEN_RECORD, CLOSE_RECORD = b"<record>", b"</record>"
MAX_RECORD = 16 << 20  # an unfinished record carried longer than this: read the slow way
PROLOG = re.compile(rb"(?:\xef\xbb\xbf)?(?:<\?xml[^<>?]*\?>)?\s*")
MARKUP = (b"<!", b"<?", b"?>", b"]]>")
WS = b" \t\r\n"
DIGITS = bytes.maketrans(b"0123456789", b"#" * 10)
DIGIT_RUN = re.compile(rb"#+")
# Elements no record handling reads, whose numbers differ from record to record (addresses, thread
# and block indices, launch counters, program counters, sizes): records that differ only in their
# text are classified once. Never the name of an element that is read (tracer.sanitize.parse_xml).
IGNORED = (b"address", b"gridid", b"current", b"x", b"y", b"z", b"pc", b"size")
SPLIT_AT = re.compile(rb"</record>[ \t\r\n]*(<record>)")
SPLIT_WINDOW = 4 << 20


class NotPlain(Exception):
    """The bytes are not in the plain layout the byte-level shortcuts need (or not well-formed)."""


def prolog_of(head: bytes) -> bytes | None:
    """What precedes the root's start tag in a file's first bytes, when that is at most the XML
    declaration; None when the root's start tag is not there or something else precedes it."""
    at = head.find(OPEN_ROOT)
    return head[:at] if at >= 0 and PROLOG.fullmatch(head, 0, at) else None


class HostStackCutter:
    """The file's bytes less each <hostStack>...</hostStack> span (most of the file; nothing reads
    them), cut only where cutting cannot change what the parser sees of the rest:
    - after the root's start tag, behind a prolog that is at most the XML declaration;
    - never once a comment, CDATA section or processing instruction has appeared (`<!`, `<?`, `?>`,
      `]]>`; their bytes `!`, `?`, `]` are looked for first, at memchr speed): cutting could end one;
    - not a span holding another <hostStack>, a `record` or the root's end tag: in a malformed or
      interleaved file that would hide what the parser must see (it is parsed instead);
    - a span longer than MAX_HOST_STACK is parsed, so what is carried between chunks stays bounded.
    `started`: the bytes begin after the root's start tag (the second part of a split file)."""

    def __init__(self, started: bool = False) -> None:
        self.cutting = True
        self.started = started  # the root's start tag has gone by

    def chunks(self, fh: BinaryIO, size: int | None = None) -> Iterator[bytes]:
        """The cut bytes of the next `size` bytes of `fh` (all of it by default), chunk by chunk."""
        carry = b""
        left = -1 if size is None else size
        while True:
            data = fh.read(CHUNK if left < 0 else min(CHUNK, left))
            left -= len(data)
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
            at = buf.find(OPEN_ROOT)
            if at < 0:
                self.cutting = False  # no root start tag in the first chunk: not the tool's layout
                return False
            self.started, start = True, at + len(OPEN_ROOT)
            self.cutting = PROLOG.fullmatch(buf, 0, at) is not None
        if self.cutting and (b"!" in buf or b"?" in buf or b"]" in buf):
            self.cutting = not any(buf.find(t, start) >= 0 for t in MARKUP)
        return self.cutting

    def _cut(self, buf: bytes, final: bool) -> tuple[bytes, bytes]:
        out, pos = [], 0
        root_end = buf.find(CLOSE_ROOT) >= 0  # mostly not: then no span can hold it
        i = buf.find(HOST_OPEN)
        while i >= 0 and (j := buf.find(HOST_CLOSE, i)) >= 0:
            k = buf.find(HOST_OPEN, i + len(HOST_OPEN))
            plain = not (0 <= k < j or buf.find(b"record", i, j) >= 0 or (root_end and buf.find(CLOSE_ROOT, i, j) >= 0))
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


def keys_of(done: bytes) -> list[bytes]:
    """The keys of the records in `done` (see RecordSplitter): their bytes with every digit read as
    `#`, so that records differing only in numbers share one key."""
    return done.translate(DIGITS).split(CLOSE_RECORD)[:-1]


def significant(key: bytes) -> tuple[slice, ...]:
    """Where the digits that can matter are in the records of one key: every run of digits (`#` in
    the key) but those in the text of an IGNORED element that holds nothing but characters (no `&`).
    Records of one key that agree there differ only in the text of ignored elements."""
    skip = []
    for name in IGNORED:
        tag = b"<" + name + b">"
        at = key.find(tag)
        while at >= 0:
            start = at + len(tag)
            end = key.find(b"<", start)
            if end >= 0 and key.find(b"&", start, end) < 0:
                skip.append((start, end))
            at = key.find(tag, start)
    skip.sort()
    out, n = [], 0
    for m in DIGIT_RUN.finditer(key):  # runs and texts both in order: one sweep
        while n < len(skip) and skip[n][1] < m.end():
            n += 1
        if not (n < len(skip) and skip[n][0] <= m.start()):
            out.append(slice(*m.span()))
    return tuple(out)


class RecordSplitter:
    """The root's children, one byte string each (its leading blanks and <record>...content, less
    the end tag), from the host-stack-cut bytes, with their keys. Raises NotPlain unless every child
    is a <record> with no other `record` inside it and nothing but blanks between them."""

    def __init__(self, head: bool) -> None:
        self.head = head  # the bytes begin with the prolog and the root's start tag
        self.carry = b""

    def feed(self, data: bytes) -> tuple[list[bytes], list[bytes]]:
        buf = self.carry + data
        if self.head:
            at = buf.find(OPEN_ROOT)
            if at < 0:
                raise NotPlain("no root start tag in the first chunk")
            buf, self.head = buf[at + len(OPEN_ROOT):], False
        end = buf.rfind(CLOSE_RECORD)
        if end < 0:
            self.carry = buf
            if len(buf) > MAX_RECORD:
                raise NotPlain("a record longer than MAX_RECORD")
            return [], []
        end += len(CLOSE_RECORD)
        done, self.carry = buf[:end], buf[end:]
        pieces = done.split(CLOSE_RECORD)
        pieces.pop()  # empty: what follows the last end tag
        if done.count(b"record") != 2 * len(pieces) or not _records_only(pieces):
            raise NotPlain("a record tag other than <record> and </record>, or something else between records")
        return pieces, keys_of(done)

    def rest(self) -> bytes:
        """What followed the last record's end tag, once all bytes are fed."""
        return self.carry

    def rest_is_whole(self) -> bool:
        """Whether the rest holds no record, or only the start of one (a truncated file)."""
        n = self.carry.count(b"record")
        return n == 0 or (n == 1 and self.carry.lstrip(WS).startswith(OPEN_RECORD))


def _records_only(pieces: list[bytes]) -> bool:
    """Whether each piece is blanks then <record> (all at C speed when they start alike)."""
    first = pieces[0]
    lead = first[:first.find(OPEN_RECORD) + len(OPEN_RECORD)]
    if lead.lstrip(WS) == OPEN_RECORD and all(map(methodcaller("startswith", lead), pieces)):
        return True
    return all(p.lstrip(WS).startswith(OPEN_RECORD) for p in pieces)


def split_point(fh: BinaryIO, size: int) -> int | None:
    """Where a second reader could start: a <record> right after a </record> near the middle of the
    file (checked by both readers: see parse_xml), or None."""
    fh.seek(size // 2)
    m = SPLIT_AT.search(fh.read(SPLIT_WINDOW))
    return size // 2 + m.start(1) if m else None
