"""Typed reads of an SQLite trace (an nsys export or a tracer capture): integer columns straight
into numpy with their SQLite types checked in the same query, text columns checked for BLOBs, the
StringIds table as positions in one string list. Anything that is not what the schema promises is
one TraceFormatError naming the table and column. Shared by the kernel/NVTX reader (nsys_reader)
and the memory-table reader (memory)."""
from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from tracer.errors import TraceFormatError
from tracer.store.inputs import read_head
from tracer.store.sqlite_open import SQLITE_MAGIC, open_error, open_sqlite

T = TypeVar("T")
TIME_LIMIT = 1 << 62  # times at or beyond this overflow the differences analysis takes


@dataclass(frozen=True)
class Col:
    """An integer column: `default` stands in where the column is absent or NULL; required columns
    (default None) must be present and never NULL."""

    name: str
    default: int | None = -1


def is_integer(expr: str, nullable: bool = False) -> str:
    """SQL that is true when expr holds an integer (or NULL where nullable). `(x | 0) = x` costs
    half of `typeof(x) = 'integer'` per row: text, BLOBs, NULL and reals with a fraction or beyond
    int64 fail it; an integral real (kept only in a column without INTEGER affinity) passes as that
    integer, which is the value it holds."""
    x = f"IFNULL({expr}, 0)" if nullable else expr
    return f"({x} | 0) = {x}"


def type_check(cols: Sequence[Col], have: set[str], prefix: str = "") -> str:
    """SQL that is true when every present column holds an integer (or NULL where it may)."""
    checks = [is_integer(f"{prefix}{c.name}", c.default is not None) for c in cols if c.name in have]
    return f"({' AND '.join(checks)})" if checks else "1"


def connect(path: Path) -> sqlite3.Connection:
    if read_head(path, 16, "an SQLite trace") != SQLITE_MAGIC:
        raise TraceFormatError(f"{path}: not an SQLite file (expected an nsys .sqlite export or a tracer capture)")
    try:
        con = open_sqlite(path)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise open_error(path, exc) from exc
    return con


class InThread(threading.Thread, Generic[T]):
    """fn() run beside the caller's work (SQLite runs queries without the GIL, so this is the
    second core); result() returns its value or re-raises its exception in the caller's thread."""

    def __init__(self, fn: Callable[[], T]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.value: T | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:  # re-raised by result() in the caller's thread
            self.error = exc

    def result(self) -> T:
        self.join()
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # value is T once run() ended without an error


class Later(Generic[T]):
    """InThread's interface for work too small to be worth a thread: fn() runs in the caller's
    thread when result() is asked, so its errors come where a thread's would."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn

    def result(self) -> T:
        return self.fn()


class SqliteTables:
    """One open export: typed column reads and the StringIds table as positions in `strings`."""

    def __init__(self, con: sqlite3.Connection, path: Path) -> None:
        self.con, self.path = con, path
        with self.reading("sqlite_master"):
            self.tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self.strings: list[str] = []
        self._ids = np.zeros(0, dtype=np.int64)  # StringIds ids, sorted
        self._pos = np.zeros(0, dtype=np.int64)  # their positions in strings
        self._lookup: dict[str, int] = {}
        self._unknown = -1

    @contextmanager
    def sibling(self) -> Iterator[SqliteTables]:
        """The same file on a connection of its own (for another thread), closed on exit."""
        own = SqliteTables(connect(self.path), self.path)
        try:
            yield own
        finally:
            own.con.close()

    def in_sibling(self, fn: Callable[[SqliteTables], T], threaded: bool = True) -> InThread[T] | Later[T]:
        """fn run in a thread on a sibling() of this file: what it returns cannot hold positions in
        strings (the sibling reads no StringIds), only StringIds ids for the caller to remap.
        threaded False: on this connection, in the caller's thread, when the result is asked."""
        if not threaded:
            return Later(lambda: fn(self))

        def run() -> T:
            with self.sibling() as own:
                return fn(own)

        return InThread(run)

    @contextmanager
    def reading(self, where: str) -> Iterator[None]:
        """Whatever a corrupt file makes sqlite3 or the conversion raise becomes one line naming it."""
        try:
            yield
        except TraceFormatError:
            raise
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(f"{self.path}: {where}: corrupt or unreadable ({exc})") from exc
        except (ValueError, TypeError, OverflowError, MemoryError) as exc:
            raise TraceFormatError(f"{self.path}: {where}: unreadable values ({type(exc).__name__}: {exc})") from exc

    def rows_at_most(self, table: str, limit: int) -> bool:
        """Whether the table holds at most `limit` rows, by its largest rowid (one index lookup; a
        missing table holds none); False when that cannot be read, so the caller takes the path
        that reads the table as before."""
        if table not in self.tables:
            return True
        try:
            top = self.con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
        except sqlite3.DatabaseError:
            return False
        return top is None or (isinstance(top, int) and top <= limit)

    def columns(self, table: str) -> set[str]:
        with self.reading(table):
            return {r[1] for r in self.con.execute(f"PRAGMA table_info({table})")}

    def ints(self, table: str, cols: Sequence[Col], where: str = "") -> list[np.ndarray]:
        """The columns as int64 arrays in rowid order, in one pass; a row whose value is not an
        integer (or NULL where a default is allowed) is an error naming the column."""
        have = self.require(table, cols)
        exprs = [c.name if c.default is None else f"COALESCE({c.name}, {c.default})" if c.name in have else str(c.default)
                 for c in cols]
        return self.fetch(table, exprs, type_check(cols, have), f"FROM {table} {where}",
                          lambda: self.check_types(table, cols, where))

    def require(self, table: str, cols: Sequence[Col]) -> set[str]:
        """The table's columns; a required one missing is an error naming it."""
        have = self.columns(table) | {"rowid"}
        for c in cols:
            if c.default is None and c.name not in have:
                raise TraceFormatError(f"{self.path}: {table} has no column {c.name} (columns: {', '.join(sorted(have))})")
        return have

    def fetch(self, label: str, exprs: Sequence[str], ok: str, source: str, diagnose: Callable[[], None]) -> list[np.ndarray]:
        """SELECT exprs (integers) FROM source as int64 columns. `ok` is SQL that holds when a row's
        values have the right SQLite types; a row where it fails, or a value the conversion refuses,
        is an error: diagnose() names the column (else one line naming label)."""
        with self.reading(label):
            try:
                cols = self._concat(exprs, ok, source)
            except sqlite3.DataError:  # a column's text beyond SQLite's string limit (tens of millions of rows)
                cols = self._rows(exprs, ok, source)
        if cols is None:
            diagnose()
            raise TraceFormatError(f"{self.path}: {label}: values of the wrong type (corrupt or foreign file)")
        return cols

    def _concat(self, exprs: Sequence[str], ok: str, source: str) -> list[np.ndarray] | None:
        """One scan in which SQLite counts the rows failing `ok` and renders each column as one
        comma-separated text (group_concat: no Python object per value, and no GIL held while it
        runs), which numpy parses; None when a row fails or a text does not parse to count values."""
        concat = ", ".join(f"group_concat({e})" for e in exprs)
        row = self.con.execute(f"SELECT count(*), total(({ok}) IS NOT 1), {concat} {source}").fetchone()
        if row[1]:
            return None
        try:  # numpy 2 raises on text it cannot parse to the end; numpy 1 warns and stops: the count check catches that
            cols = [np.fromstring(t, dtype=np.int64, sep=",") if t else np.zeros(0, dtype=np.int64) for t in row[2:]]
        except ValueError:
            return None
        return cols if all(len(c) == row[0] for c in cols) else None

    def _rows(self, exprs: Sequence[str], ok: str, source: str) -> list[np.ndarray] | None:
        """The same, row by row: for columns too long for one SQLite string."""
        if self.con.execute(f"SELECT count(*) FROM (SELECT ({ok}) AS ok_ {source}) WHERE ok_ IS NOT 1").fetchone()[0]:
            return None
        try:
            flat = np.fromiter(chain.from_iterable(self.con.execute(f"SELECT {', '.join(exprs)} {source}")), dtype=np.int64)
        except (ValueError, TypeError, OverflowError):
            return None
        block = flat.reshape(-1, len(exprs))
        return [block[:, i] for i in range(len(exprs))]

    def require_types(self, table: str, cols: Sequence[Col]) -> None:
        """Every row of the table holds integers (or NULL where a default is allowed) in cols, in
        one scan; else the error check_types gives (a join would drop such a row unseen)."""
        have = self.require(table, cols)
        with self.reading(table):
            wrong = self.con.execute(f"SELECT count(*) FROM {table} WHERE {type_check(cols, have)} IS NOT 1").fetchone()[0]
        if wrong:
            self.check_types(table, cols)
            raise TraceFormatError(f"{self.path}: {table}: values of the wrong type (corrupt or foreign file)")

    def check_types(self, table: str, cols: Sequence[Col], where: str = "") -> None:
        """Raise naming the first column whose rows hold something other than integers (or NULL
        where a default is allowed)."""
        have = self.columns(table)
        for c in cols:
            if c.name not in have:
                continue
            allowed = "('integer')" if c.default is None else "('integer', 'null')"
            with self.reading(table):
                rows = self.con.execute(f"SELECT typeof({c.name}), count(*) FROM {table} {where} "
                                        f"{'AND' if where else 'WHERE'} typeof({c.name}) NOT IN {allowed} GROUP BY 1").fetchall()
            if rows:
                found = ", ".join(f"{n} {kind}" for kind, n in rows)
                raise TraceFormatError(f"{self.path}: {table}.{c.name} holds {found} value(s) where integers belong "
                                       "(corrupt or foreign file)")

    def texts(self, table: str, col: str, key: str = "rowid", where: str = "") -> tuple[np.ndarray, list[str | None]]:
        """(key, text) for every row; BLOBs and other non-text values are an error naming the column."""
        with self.reading(f"{table}.{col}"):
            rows = self.con.execute(f"SELECT {key}, {col} FROM {table} {where}").fetchall()
        values = [v for _, v in rows]
        kinds = set(map(type, values))
        if kinds - {str, type(None)}:
            bad = sum(1 for v in values if v is not None and not isinstance(v, str))
            raise TraceFormatError(f"{self.path}: {table}.{col} holds {bad} non-text value(s) (BLOB or number) where strings belong")
        with self.reading(f"{table}.{key}"):
            keys = np.array([k for k, _ in rows], dtype=np.int64)
        return keys, values

    def read_strings(self) -> None:
        if "StringIds" not in self.tables:
            return
        ids, values = self.texts("StringIds", "value", key="id")
        if any(v is None for v in values):
            raise TraceFormatError(f"{self.path}: StringIds.value holds NULL strings")
        self.strings = list(values)  # type: ignore[arg-type]  # NULL strings were refused just above
        order = np.argsort(ids, kind="stable")
        self._ids, self._pos = ids[order], order.astype(np.int64)

    def remap(self, ids: np.ndarray) -> np.ndarray:
        """StringIds ids -> positions in strings; unknown ids become one '<unknown>' entry."""
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64)
        at = np.clip(np.searchsorted(self._ids, ids), 0, max(len(self._ids) - 1, 0))
        found = (self._ids[at] == ids) if len(self._ids) else np.zeros(len(ids), dtype=bool)
        if found.all():
            return self._pos[at]
        return np.where(found, self._pos[at] if len(self._pos) else 0, self.intern("<unknown>"))

    def intern(self, value: str) -> int:
        return int(self.intern_all([value])[0])

    def intern_all(self, values: list[str]) -> np.ndarray:
        """Positions in strings of each value, appending the new ones (each distinct value once)."""
        if len(self._lookup) != len(self.strings):
            self._lookup = {s: i for i, s in enumerate(self.strings)}
        lookup, strings = self._lookup, self.strings
        for v in dict.fromkeys(values):
            if v not in lookup:
                lookup[v] = len(strings)
                strings.append(v)
        return np.array([lookup[v] for v in values], dtype=np.int64)

    def check_times(self, table: str, start: np.ndarray, end: np.ndarray, open_end: bool = False,
                    corr: np.ndarray | None = None) -> None:
        """Negative, backwards or overflowing times mean a corrupt file, not a verdict. Nsight Systems
        counts times from the session start and no export of it we know holds a negative one (the
        nsys-ai test file with a runtime call at -3,000 ns was written by hand): refused, naming the row."""
        closed = end >= 0 if open_end else np.ones(len(end), dtype=bool)
        bad = (start < 0) | (start >= TIME_LIMIT) | (end >= TIME_LIMIT) | (closed & (end < start))
        if not open_end:
            bad |= end < 0
        if bad.any():
            i = int(np.argmax(bad))
            which = f"correlationId {int(corr[i])}" if corr is not None else f"row {i + 1} in storage order"
            before = " (negative: before the session start)" if start[i] < 0 or (end[i] < 0 and not open_end) else ""
            raise TraceFormatError(f"{self.path}: {table}: {int(bad.sum())} row(s) with impossible start/end "
                                   f"(first: {which}, start {int(start[i])}, end {int(end[i])}{before}; corrupt file)")
