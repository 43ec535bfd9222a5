"""Kernel names people can read: C++ names of hundreds of characters (template arguments, argument
lists, namespaces) shortened for text and pictures. The full names stay in the JSON and the report."""
from __future__ import annotations

import re

ELIDED = "<…>"


def ellipsize(s: str, width: int, middle: bool = False) -> str:
    if len(s) <= width:
        return s
    if middle:
        return s[: width // 2 - 1] + "…" + s[-(width - width // 2):]
    return s[: width - 1] + "…"


def without_arguments(name: str) -> str:
    """The name up to its argument list: the first '(' outside template brackets."""
    depth = 0
    for i, ch in enumerate(name):
        depth += 1 if ch in "<[" else -1 if ch in ">]" else 0
        if ch == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def elide_templates(name: str) -> str:
    """Each outermost template argument list as <…>: `f<4, g<float> >` -> `f<…>`."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append(ELIDED)
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short_name(name: str, width: int = 56) -> str:
    """A kernel name a legend can hold: no `void`, argument list, namespaces or integer casts; template
    arguments elided when the name is still longer than width; cut to width."""
    s = without_arguments(re.sub(r"\bvoid ", "", name.replace("(anonymous namespace)::", "")))
    s = re.sub(r"\b[A-Za-z_]\w*::", "", s)
    s = re.sub(r"\s+", " ", re.sub(r"\((?:unsigned )?(?:int|long|short|char)\)", "", s)).strip() or name.strip()
    return ellipsize(elide_templates(s) if len(s) > width else s, width)


def text_name(name: str, width: int = 80) -> str:
    """A kernel name for a line of text: namespaces kept, template arguments elided when too long."""
    s = re.sub(r"\s+", " ", without_arguments(re.sub(r"^void ", "", name.strip()))).strip() or name.strip()
    return ellipsize(elide_templates(s) if len(s) > width else s, width)
