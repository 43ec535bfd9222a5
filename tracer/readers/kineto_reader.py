"""Reads PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzipped, into the trace model.

Streamed: the standard library's C JSON decoder takes one `traceEvents` entry at a time from a
bounded text buffer (a walk of the top-level object finds the list and decodes the other values one
by one), and only the complete ("X") events of the categories read are kept, as numeric columns:
memory follows the kernels, not the file. Truncated or invalid JSON, NaN or Infinity, nesting past
the decoder's recursion limit, a value over MAX_VALUE characters, text after the top-level object:
each is a one-line TraceFormatError. So is an event that is read and malformed (a timestamp that is
not a finite number, a name that is not a string, `args` that is not an object, an id that is not an
integer), named by its index. Entries of other phases and categories (flows, metadata, instant
events) are not read, so only their JSON is checked.

Event edges come from `cuda_sync` events of kind "Stream Wait Event": the waiting stream, the
recording stream (`wait_on_stream`) and the record's correlation id, which becomes its key.

Streams belong to a process. GPU events carry the device as their `pid`, so a trace whose runtime
calls come from several processes gives each GPU event (kernel, copy, memset, sync) the process of
the runtime call with its correlation id, and keys its stream, correlation id and event key by that
process (tracer.model.trace, PROCESS_SHIFT), as the Nsight Systems reader does with globalPid. A GPU
event whose correlation id no runtime call has, or several processes' calls have, cannot be given
a process: the trace is refused, naming the id.
"""
from __future__ import annotations

import json
import re
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from tracer.errors import TraceFormatError
from tracer.interner import Interner
from tracer.jsonkeys import DuplicateKey, unique_keys
from tracer.store.inputs import open_text
from tracer.model.arrays import unique
from tracer.model.trace import COPY_KIND_CODES, MEMCPY, MEMSET, Apis, EventRecord, Kernels, Ranges, Sync, SyncKind, Trace, Transfers, from_columns
from tracer.readers.nsys_reader import ProcessKeys

SYNC_KINDS = {"Stream Wait Event": SyncKind.WAIT, "Stream Sync": SyncKind.STREAM,
              "Event Sync": SyncKind.EVENT, "Context Sync": SyncKind.CONTEXT}
RANGE_CATS = ("user_annotation", "cpu_op")
API_CATS = ("cuda_runtime", "cuda_driver")
MAX_US = 4e15  # |ts| and dur in microseconds (126 years): start + dur in nanoseconds stays inside int64
MAX_ID = 1 << 62
CHUNK = 1 << 22  # characters read at a time
MAX_VALUE = 1 << 26  # characters of one top-level value or one event
MAX_EVENTS = 50_000_000  # entries of traceEvents, read or not (a gzip is also held to GZIP_RATIO_LIMIT)
WHITESPACE = " \t\n\r"


class BadEvent(ValueError):
    """One event that cannot be read (the caller adds the file's name and the event's index)."""


class BadJson(ValueError):
    """Not the JSON of a Chrome trace (the caller adds the file's name)."""


def _constant(name: str) -> float:
    raise BadJson(f"not valid JSON ({name} is not a JSON number)")


SCAN = json.JSONDecoder(parse_constant=_constant, object_pairs_hook=unique_keys).scan_once  # type: ignore[attr-defined]  # set on every instance; typeshed omits it. The C scanner: (value, end) at an index
SPACE = re.compile(r"[ \t\n\r]*")
SEPARATOR = re.compile(r"[ \t\n\r]*([,\]}])[ \t\n\r]*")


class _Text:
    """The file's text through a buffer that holds the value being decoded and one chunk more."""

    def __init__(self, fh: TextIO) -> None:
        self.fh, self.buf, self.i, self.eof = fh, "", 0, False
        self.base = 0  # characters dropped from the buffer's front

    def _more(self) -> bool:
        chunk = "" if self.eof else self.fh.read(CHUNK)
        self.eof = not chunk
        if len(self.buf) - self.i + len(chunk) > MAX_VALUE + CHUNK:
            raise BadJson(f"not valid JSON, truncated or corrupt (a value longer than {MAX_VALUE} characters "
                          f"from character {self.base + self.i})")
        self.base += self.i
        self.buf, self.i = self.buf[self.i:] + chunk, 0
        return bool(chunk)

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file)."""
        while True:
            self.i = SPACE.match(self.buf, self.i).end()  # type: ignore[union-attr]  # the pattern matches (maybe empty) at every index
            if self.i < len(self.buf) or not self._more():
                return self.buf[self.i:self.i + 1]

    def expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            found = repr(c) if c else "the end"
            raise BadJson(f"not valid JSON, truncated or corrupt (expected {' or '.join(chars)} at character "
                          f"{self.base + self.i}, found {found})")
        self.i += 1
        return c

    def separator(self, closer: str) -> bool:
        """After a list item or an object member: True for a comma, False for the closer."""
        m = SEPARATOR.match(self.buf, self.i)
        if m and m.end() < len(self.buf) and m.group(1) in ("," + closer):
            self.i = m.end()
            return m.group(1) == ","
        return self.expect("," + closer) == ","  # at the buffer's end, or an error to name

    def value(self) -> Any:
        """One JSON value; more text is read while it runs to the buffer's end (it may go on)."""
        spaced = False
        while True:
            try:
                v, end = SCAN(self.buf, self.i)
                if end < len(self.buf) or self.eof:
                    self.i = end
                    return v
            except StopIteration:  # no value starts here: whitespace first, or the end of the text
                if not spaced:
                    spaced = True
                    self.peek()
                    continue
                if self.eof:
                    raise json.JSONDecodeError("Expecting value", self.buf, self.i) from None
            except json.JSONDecodeError:
                if self.eof:
                    raise
            self._more()


def trace_events(fh: TextIO) -> Iterator[Any]:
    """The entries of the top-level object's `traceEvents` list, one at a time; the rest of the
    object is decoded and dropped, and nothing may follow it."""
    text, found, keys = _Text(fh), False, set()
    text.expect("{")
    if text.peek() == "}":
        text.expect("}")
    else:
        while True:
            key = text.value()
            if not isinstance(key, str):
                raise BadJson(f"not valid JSON (an object key is {type(key).__name__}, not a string)")
            if key in keys:
                raise BadJson(f"the top-level object names {key[:80]!r} twice (which one holds the trace is ambiguous)")
            keys.add(key)
            text.expect(":")
            if key == "traceEvents" and not found and text.peek() == "[":
                found = True
                yield from _items(text)
            else:
                text.value()
            if not text.separator("}"):
                break
    if text.peek():
        raise BadJson(f"not valid JSON (more text after the top-level object, at character {text.base + text.i})")
    if not found:
        raise BadJson("no traceEvents list (not a PyTorch profiler Chrome trace)")


def _items(text: _Text) -> Iterator[Any]:
    text.expect("[")
    if text.peek() == "]":
        text.expect("]")
        return
    while True:
        yield text.value()
        if not text.separator("]"):
            return


def _bad_number(key: str, v: object, low: float) -> BadEvent:
    return BadEvent(f"'{key}' is {v!r:.40} (allowed: a finite number of microseconds, {low:g} to {MAX_US:g})")


def _int(d: dict[str, Any], key: str, default: int | None) -> int:
    """d[key], an integer; default None: the key is required (a GPU operation's device and stream:
    one without them would share 'stream -1' with every other such operation and be judged ordered)."""
    v = d.get(key, default)
    if type(v) is not int or not -MAX_ID <= v <= MAX_ID:
        raise BadEvent(f"'{key}' is {v!r:.40} (allowed: an integer)")
    return v


class _Columns:
    """The events read so far, as columns (start and end as the float microseconds Kineto gives,
    less `base`, the first event's whole microseconds; turned into nanoseconds at the end as
    round((us - base) * 1000) + base * 1000: a float of epoch microseconds (about 1.7e15) times 1000
    is beyond float64's exact integers and came out in steps of 256 ns)."""

    def __init__(self) -> None:
        self.s = Interner()
        self.base: int | None = None
        self.k_start, self.k_end, self.k_device, self.k_stream, self.k_corr, self.k_name = (
            array("d"), array("d"), array("q"), array("q"), array("q"), array("q"))
        self.apis: list[array[Any]] = [array("d"), array("d"), array("q"), array("q"), array("q"), array("q")]  # and the pid
        self.ranges: list[array[Any]] = [array("d"), array("d"), array("q"), array("q")]
        self.syncs: list[Sync] = []
        self.records: list[tuple[int, int, int, int]] = []  # (device, recording stream, key, the naming sync's corr)
        self.memcpy = self.memset = 0
        self.x: list[array[Any]] = [array("d"), array("d"), array("q"), array("q"), array("q"), array("q"), array("q"), array("q")]

    def add(self, e: Any) -> None:
        if type(e) is not dict:
            raise BadEvent(f"is {type(e).__name__}, not an event object")
        if e.get("ph") != "X":
            return
        cat = e.get("cat")
        if cat == "kernel":
            self._kernel(e)
        elif cat in API_CATS:
            args, times, name = self._common(e)
            _append(self.apis, (*times, _int(e, "tid", -1), _int(args, "correlation", -1), self.s(name), _int(e, "pid", -1)))
        elif cat in RANGE_CATS:
            args, times, name = self._common(e)
            _append(self.ranges, (*times, _int(e, "tid", -1), self.s(name)))
        elif cat == "cuda_sync":
            self._sync(e)
        elif cat == "gpu_memcpy":
            self.memcpy += 1
            self._transfer(e, MEMCPY)
        elif cat == "gpu_memset":
            self.memset += 1
            self._transfer(e, MEMSET)

    def _common(self, e: dict[str, Any]) -> tuple[dict[str, Any], tuple[float, float], str]:
        """args, (start, end) and the name of an event that is read, each checked."""
        name, args = e.get("name"), e.get("args")
        ts: Any = e.get("ts")
        dur: Any = e.get("dur")
        if type(name) is not str:
            raise BadEvent(f"'name' is {name!r:.40} (allowed: a string)")
        if args is None:
            args = {}
        elif type(args) is not dict:
            raise BadEvent(f"'args' is {type(args).__name__} (allowed: an object)")
        if not ((t := type(ts)) is int or t is float) or not -MAX_US <= ts <= MAX_US:  # NaN fails the comparison
            raise _bad_number("ts", ts, -MAX_US)
        if not ((t := type(dur)) is int or t is float) or not 0 <= dur <= MAX_US:
            raise _bad_number("dur", dur, 0)
        if self.base is None:
            self.base = int(ts)
        rel = ts - self.base  # exact: an int, or a float within a factor of two of the base
        return args, (float(rel), float(rel + dur)), name

    def _kernel(self, e: dict[str, Any]) -> None:
        args, (start, end), name = self._common(e)
        device, stream, corr = args.get("device"), args.get("stream"), args.get("correlation", -1)
        if not (type(device) is int and type(stream) is int and type(corr) is int
                and -MAX_ID <= device <= MAX_ID and -MAX_ID <= stream <= MAX_ID and -MAX_ID <= corr <= MAX_ID):
            device, stream, corr = _int(args, "device", None), _int(args, "stream", None), _int(args, "correlation", -1)
        self.k_start.append(start)
        self.k_end.append(end)
        self.k_device.append(device)
        self.k_stream.append(stream)
        self.k_corr.append(corr)
        self.k_name.append(self.s(name))

    def _transfer(self, e: dict[str, Any], op: int) -> None:
        """A gpu_memcpy ('Memcpy HtoD (Pinned -> Device)') or gpu_memset event."""
        args, (start, end), name = self._common(e)
        words = name.split()
        kind = COPY_KIND_CODES.get(words[1], 0) if op == MEMCPY and len(words) > 1 else 0
        _append(self.x, (start, end, _int(args, "device", None), _int(args, "stream", None), _int(args, "correlation", -1), op,
                         kind, _int(args, "bytes", -1)))

    def _sync(self, e: dict[str, Any]) -> None:
        args, (start, end), name = self._common(e)
        kind_name = args.get("cuda_sync_kind", name)
        kind = SYNC_KINDS.get(kind_name, SyncKind.UNKNOWN) if isinstance(kind_name, str) else SyncKind.UNKNOWN
        key, device = _int(args, "wait_on_cuda_event_record_corr_id", -1), _int(args, "device", 0)
        corr = _int(args, "correlation", -1)
        if kind in (SyncKind.WAIT, SyncKind.EVENT) and key != -1:
            self.records.append((device, _int(args, "wait_on_stream", -1), key, corr))
        stream = _int(args, "stream", -1) if kind in (SyncKind.WAIT, SyncKind.STREAM) else -1
        self.syncs.append(Sync(kind=kind, device=device, stream=stream, corr=corr, key=key, start=self._ns(start), end=self._ns(end),
                               tid=-1, api=name))

    def trace(self, path: Path) -> Trace:
        kernels = self._sorted([self.k_start, self.k_end, self.k_device, self.k_stream, self.k_corr, self.k_name],
                          order=(0, 1, 2, 3, 4, 5))
        *api_cols, api_pid = self._sorted(self.apis, order=(3,))
        procs = _Processes(path, api_cols[3], api_pid)
        keys = ProcessKeys(path, api_pid)
        api_cols[3] = keys.key(api_cols[3], api_pid, "correlation id")
        by_corr = np.argsort(api_cols[3], kind="stable")
        api = from_columns(Apis, [c[by_corr] for c in api_cols])
        k_proc = procs.of(kernels[4], "kernel")
        raw_stream = kernels[3]
        kernels[3], kernels[4] = keys.key(kernels[3], k_proc, "stream"), keys.key(kernels[4], k_proc, "correlation id")
        syncs = self._syncs(procs, keys)
        tids = api.index_of(np.array([y.corr for y in syncs], dtype=np.int64))
        syncs = [replace(y, tid=int(api.tid[i])) if i >= 0 else y for y, i in zip(syncs, tids)]
        return Trace(source=str(path), producer="pytorch-profiler (kineto)", strings=self.s.items, kernels=from_columns(Kernels, kernels), apis=api,
                     ranges=Ranges(*self._sorted(self.ranges, order=(0, 1, 2, 3))),
                     records=self._records(procs, keys), syncs=tuple(syncs), memcpy_count=self.memcpy,
                     memset_count=self.memset, transfers=self._transfers(procs, keys),
                     streams=keys.origins(kernels[3], raw_stream, kernels[2], k_proc) if keys.several else {},
                     processes=keys.pids() if keys.several else ())

    def _syncs(self, procs: _Processes, keys: ProcessKeys) -> list[Sync]:
        syncs = sorted(self.syncs, key=lambda y: y.corr)
        if not keys.several:
            return syncs
        proc = procs.of(np.array([y.corr for y in syncs], dtype=np.int64), "cuda_sync")
        out = []
        for y, p in zip(syncs, proc.tolist()):
            one = np.array([p], dtype=np.int64)
            stream, corr, key = (int(keys.key(np.array([v], dtype=np.int64), one, what)[0])
                                 for v, what in ((y.stream, "stream"), (y.corr, "correlation id"), (y.key, "event key")))
            out.append(replace(y, stream=stream, corr=corr, key=key))
        return sorted(out, key=lambda y: y.corr)

    def _records(self, procs: _Processes, keys: ProcessKeys) -> tuple[EventRecord, ...]:
        """One record per (process, key), the last sync naming it giving its stream."""
        rows = np.array(self.records, dtype=np.int64).reshape(len(self.records), 4)
        proc = procs.of(rows[:, 3], "cuda_sync") if keys.several else np.zeros(len(rows), dtype=np.int64)
        stream, key = keys.key(rows[:, 1], proc, "stream"), keys.key(rows[:, 2], proc, "event key")
        found = {int(k): EventRecord(int(d), int(s), int(k), int(k)) for d, s, k in zip(rows[:, 0].tolist(), stream.tolist(), key.tolist())}
        return tuple(sorted(found.values(), key=lambda r: r.corr))

    def _transfers(self, procs: _Processes, keys: ProcessKeys) -> Transfers:
        start, end, dev, stream, corr, op, kind, size = self._sorted(self.x, order=(0,))
        proc = procs.of(corr, "gpu_memcpy/gpu_memset")
        return Transfers(start=start, end=end, device=dev, stream=keys.key(stream, proc, "stream"), corr=keys.key(corr, proc, "correlation id"),
                         op=op, copy_kind=kind, bytes=size, graph_node=np.zeros(len(start), dtype=np.int64))


    def _ns(self, us: float) -> int:
        return int(round(float(us) * 1000)) + (self.base or 0) * 1000

    def _sorted(self, cols: list[array[Any]], order: tuple[int, ...]) -> list[np.ndarray]:
        """int64 columns (the time columns in nanoseconds), rows sorted by the columns in `order`
        (stable: rows equal on those keep the file's order)."""
        out = [np.rint(np.frombuffer(c, dtype=np.float64) * 1000).astype(np.int64) + (self.base or 0) * 1000 if c.typecode == "d"
               else np.frombuffer(c, dtype=np.int64) for c in cols]
        idx = np.lexsort([out[k] for k in reversed(order)])
        return [np.ascontiguousarray(c[idx]) for c in out]


class _Processes:
    """The process of a GPU event: that of the runtime call with its correlation id (needed only
    when the runtime calls come from several processes)."""

    def __init__(self, path: Path, corr: np.ndarray, pid: np.ndarray) -> None:
        self.path, self.corr, self.pid = path, corr, pid  # corr sorted
        self.several = len(unique(pid)) > 1

    def of(self, corr: np.ndarray, what: str) -> np.ndarray:
        if not self.several:
            return np.full(len(corr), self.pid[0] if len(self.pid) else -1, dtype=np.int64)
        lo, hi = np.searchsorted(self.corr, corr, side="left"), np.searchsorted(self.corr, corr, side="right")
        at = np.minimum(lo, len(self.corr) - 1)
        if (lo == hi).any():
            bad = int(corr[np.argmax(lo == hi)])
            raise TraceFormatError(f"{self.path}: a {what} event with correlation id {bad} has no runtime call, in a trace of "
                                   f"{len(unique(self.pid))} processes: cannot tell whose it is (profile one process per file)")
        last = np.maximum(hi - 1, 0)
        shared = self.pid[at] != self.pid[last]
        if shared.any():
            i = int(np.argmax(shared))
            raise TraceFormatError(f"{self.path}: correlation id {int(corr[i])} belongs to runtime calls of processes {int(self.pid[at[i]])} "
                                   f"and {int(self.pid[last[i]])}: cannot tell whose GPU work it names (profile one process per file)")
        out: np.ndarray = self.pid[at]
        return out


def _append(cols: list[array[Any]], row: tuple[Any, ...]) -> None:
    for col, v in zip(cols, row):
        col.append(v)




def _open(path: Path) -> TextIO:
    return open_text(path, "a PyTorch profiler trace")


def read_kineto(path: Path) -> Trace:
    cols = _Columns()
    i = -1
    try:
        with _open(path) as fh:
            for i, e in enumerate(trace_events(fh)):  # i names the bad event in the error below
                cols.add(e)
                if i >= MAX_EVENTS:
                    raise BadJson(f"more than {MAX_EVENTS:,} traceEvents (split the profile: fewer steps per trace)")
    except BadEvent as exc:
        raise TraceFormatError(f"{path}: traceEvents[{i}]: {exc}") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc})") from None
    except RecursionError:
        raise TraceFormatError(f"{path}: JSON nested too deeply (a Chrome trace's events are flat objects)") from None
    except (BadJson, DuplicateKey) as exc:
        raise TraceFormatError(f"{path}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise TraceFormatError(f"{path}: not valid JSON, truncated or corrupt ({str(exc)[:200]})") from None
    return cols.trace(path)
