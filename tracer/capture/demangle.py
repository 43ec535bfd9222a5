"""Itanium C++ demangling through libstdc++'s __cxa_demangle (ctypes, no subprocess)."""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


@lru_cache(maxsize=1)
def _cxa() -> tuple[object, object] | None:
    name = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    try:
        lib = ctypes.CDLL(name)
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    fn = lib.__cxa_demangle
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    return fn, libc.free


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled name, or the name itself when it is not a mangled C++ name."""
    if not name.startswith("_Z"):
        return name
    funcs = _cxa()
    if funcs is None:
        return name
    fn, free = funcs
    status = ctypes.c_int()
    ptr = fn(name.encode(), None, None, ctypes.byref(status))  # type: ignore[operator]  # _cxa types the C function as object
    if status.value != 0 or not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        free(ptr)  # type: ignore[operator]  # _cxa types the C function as object


def short_name(demangled: str) -> str:
    """The bare function name, as nsys's shortName: no return type, namespaces, templates or arguments."""
    demangled = demangled.replace("(anonymous namespace)", "{anonymous}")  # a namespace, not an argument list
    depth, cut = 0, len(demangled)
    for i, ch in enumerate(demangled):  # the argument list starts at the first '(' outside templates
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    head, depth, out = demangled[:cut], 0, []
    for ch in head:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).split()[-1].split("::")[-1] if "".join(out).split() else demangled
