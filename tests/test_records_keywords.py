"""Records of more than 4 fields are built with keywords: every dataclass in tracer/ with more than
4 init fields is declared kw_only=True, so a positional call (a reordered field silently
misassigned) is a TypeError. Read from the source with ast: nothing is imported."""
from __future__ import annotations

import ast
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 4


def _is_dataclass(deco: ast.expr) -> bool:
    target = deco.func if isinstance(deco, ast.Call) else deco
    return (isinstance(target, ast.Name) and target.id == "dataclass") or (
        isinstance(target, ast.Attribute) and target.attr == "dataclass")


def _init_fields(cls: ast.ClassDef) -> list[str]:
    """Annotated names of the class body that __init__ takes (not ClassVar, KW_ONLY or field(init=False))."""
    out = []
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        ann = ast.unparse(stmt.annotation)
        if "ClassVar" in ann or ann.endswith("KW_ONLY"):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                                               for k in value.keywords):
            continue
        out.append(stmt.target.id)
    return out


def positional_records(source: str, name: str) -> list[str]:
    """'file:line Class (n fields)' for each dataclass of more than LIMIT fields without kw_only=True."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for deco in (d for d in node.decorator_list if _is_dataclass(d)):
            kw_only = isinstance(deco, ast.Call) and any(
                k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True for k in deco.keywords)
            n = len(_init_fields(node))
            if n > LIMIT and not kw_only:
                out.append(f"{name}:{node.lineno} {node.name} ({n} fields)")
    return out


def test_every_record_of_more_than_four_fields_is_keyword_only() -> None:
    found = [hit for path in sorted((ROOT / "tracer").rglob("*.py"))
             for hit in positional_records(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "add kw_only=True (and build them with keywords):\n" + "\n".join(found)


@pytest.mark.parametrize("source,flagged", [
    ("@dataclass(frozen=True)\nclass A:\n    a: int\n    b: int\n    c: int\n    d: int\n    e: int\n", ["t.py:2 A (5 fields)"]),
    ("@dataclasses.dataclass\nclass A:\n    a: int\n    b: int\n    c: int\n    d: int\n    e: int\n", ["t.py:2 A (5 fields)"]),
    ("@dataclass(frozen=True, kw_only=False)\nclass A:\n    a: int\n    b: int\n    c: int\n    d: int\n    e: int\n",
     ["t.py:2 A (5 fields)"]),
    ("@dataclass(frozen=True, kw_only=True)\nclass A:\n    a: int\n    b: int\n    c: int\n    d: int\n    e: int\n", []),
    ("@dataclass\nclass A:\n    a: int\n    b: int\n    c: int\n    d: int\n", []),
    ("@dataclass\nclass A:\n    a: int\n    b: int\n    c: int\n    d: int\n    e: ClassVar[int] = 1\n"
     "    f: list = field(default_factory=list, init=False)\n", []),
    ("class A:\n    a: int\n    b: int\n    c: int\n    d: int\n    e: int\n", []),
])
def test_the_check_flags_positional_records_and_only_those(source: str, flagged: list[str]) -> None:
    assert positional_records(source, "t.py") == flagged


def test_a_keyword_only_record_refuses_positional_construction() -> None:
    from tracer.analysis.analyze import StreamStats

    with pytest.raises(TypeError):
        StreamStats(0, 7, 3, 10, 2, 12, 4)  # type: ignore[misc]  # the point of the test: positional is refused
    s = StreamStats(device=0, stream=7, kernels=3, busy_ns=10, idle_ns=2, span_ns=12, max_gap_ns=4)
    assert (s.stream, s.max_gap_ns) == (7, 4)
    with pytest.raises(FrozenInstanceError):
        s.stream = 8  # type: ignore[misc]  # frozen: the assignment must raise
