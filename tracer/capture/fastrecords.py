"""CUPTI activity records read from their C structs in one struct unpack each.

cupti-python's attribute reads go through numpy record views: about 10 us a field on the H200's
host, 205 us per kernel record, 45% of a `--memory` GPT-2 step's time in cProfile (2026-12-01). Each
record type's field offsets come from cupti-python's own numpy dtype
(`cupti.activity_<type>_dtype`, the record's `ptr` is its struct), and the unpacked values are
checked against the attribute reads on the first record of each type: any difference (or a field
the dtype lacks or holds as no plain integer) keeps the attribute reads for that type, counted."""
from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Callable
from typing import Any

CODES = {("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q", ("i", 1): "b", ("i", 2): "h", ("i", 4): "i",
         ("i", 8): "q"}
STRINGS = frozenset({"name", "domain"})  # char pointers CUPTI keeps for the process (shared by records of one kernel)
Slow = Callable[[Any], tuple]


def dtype_name(cls_name: str) -> str:
    """ActivityKernel10 -> activity_kernel10_dtype, ActivityAPI -> activity_api_dtype."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cls_name).lower() + "_dtype"


class Unpacker:
    """The named integer fields of one struct type, by offset (strings: their char pointers, read)."""

    def __init__(self, dtype: Any, fields: tuple[str, ...]) -> None:
        at = []
        for i, f in enumerate(fields):
            sub, offset = dtype.fields[f][:2]
            at.append((int(offset), CODES[(sub.kind, sub.itemsize)], i, sub.itemsize))
        at.sort()
        fmt, end = "<", 0
        for offset, code, _, size in at:
            if offset < end:
                raise ValueError(f"overlapping fields in {dtype}")
            fmt += f"{offset - end}x{code}" if offset > end else code
            end = offset + size
        self.unpack = struct.Struct(fmt).unpack_from
        self.size = int(dtype.itemsize)
        place = {i: j for j, (_, _, i, _) in enumerate(at)}
        self.order = [place[i] for i in range(len(fields))]
        self.strings = [i for i, f in enumerate(fields) if f in STRINGS]
        self.names: dict[int, str] = {}

    def __call__(self, ptr: int) -> tuple:
        raw = self.unpack(ctypes.string_at(ptr, self.size))
        vals = [raw[j] for j in self.order]
        for i in self.strings:
            p = vals[i]
            name = self.names.get(p)
            if name is None:
                name = self.names[p] = ctypes.string_at(p).decode(errors="replace") if p else ""
            vals[i] = name
        return tuple(vals)


class FastRecords:
    """Per (record type, fields): an Unpacker that agreed with the attribute reads, or None."""

    def __init__(self, module: Any, count_error: Callable[[str, BaseException], None]) -> None:
        self.module, self.count_error = module, count_error
        self.readers: dict[tuple[type, tuple[str, ...]], Unpacker | None] = {}

    def read(self, a: Any, fields: tuple[str, ...], slow: Slow) -> tuple:
        key = (type(a), fields)
        try:
            u = self.readers[key]
        except KeyError:
            u = self.readers[key] = self._checked(a, fields, slow)
        if u is not None:
            try:
                return u(int(a.ptr))
            except Exception:  # never a lost record: this one read through its attributes
                pass
        return slow(a)

    def _checked(self, a: Any, fields: tuple[str, ...], slow: Slow) -> Unpacker | None:
        try:
            u = Unpacker(getattr(self.module, dtype_name(type(a).__name__)), fields)
            fast, ref = u(int(a.ptr)), tuple(slow(a))
            if fast != ref:
                raise ValueError(f"{type(a).__name__}: struct read {fast} != attributes {ref}")
            return u
        except Exception as exc:  # the attribute reads stay: slower, never wrong
            self.count_error(f"fast_records_{type(a).__name__}", exc)
            return None
