"""The import graph of tracer/ from the source (stdlib ast only: nothing is imported or run).

    python scripts/import_graph.py            # one line per module: what it imports (lazy ones marked)
    python scripts/import_graph.py --dot      # Graphviz: dot -Tsvg -o imports.svg
    python scripts/import_graph.py --check    # the layering rules; exit 1 and one line per breach

An edge is eager (module level) or lazy (inside a function); imports under `if TYPE_CHECKING:`
are left out (they never run). tests/test_architecture.py runs the same checks.
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tracer"
# Reading: everything after capture (readers, analysis, text, plots, the report): never runs a
# process, never imports capture code, torch or cuda.core.
READING = ("tracer.artifact", "tracer.trace.", "tracer.sanitize.parse_", "tracer.sanitize.model", "tracer.plots.",
           "tracer.report.", "tracer.compare.", "tracer.app.")
RECORDING = ("tracer.capture.", "tracer.kernel.launch", "tracer.proc", "torch", "cuda", "cupti")
HEAVY = ("scipy", "cuda", "torch", "matplotlib", "rich")  # never imported at start-up (command modules import them lazily)
COMMANDS = "tracer.commands."
MAX_COMMAND_LINES = 100


@dataclass(frozen=True)
class Edge:
    source: str
    target: str  # a tracer module, or an external top-level package
    lazy: bool


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it runs lazily (inside a function); TYPE_CHECKING blocks skipped."""
    def walk(node: ast.AST, lazy: bool) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                yield from (x for n in child.orelse for x in walk_one(n, lazy))
                continue
            yield from walk_one(child, lazy)

    def walk_one(node: ast.AST, lazy: bool) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy
        else:
            yield from walk(node, lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    yield from walk(tree, False)


def _targets(node: ast.Import | ast.ImportFrom, source: str, is_package: bool, modules: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [_resolve(a.name, modules) for a in node.names]
    base = node.module or ""
    if node.level:
        parts = source.split(".") if is_package else source.split(".")[:-1]
        base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in modules else _resolve(base, modules))
    return out


def _resolve(name: str, modules: set[str]) -> str:
    """A tracer module by its dotted name (the longest one that exists), else the external top-level package."""
    if not name.startswith(PACKAGE):
        return name.split(".")[0]
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts) or name


def build(root: Path = ROOT) -> tuple[dict[str, Path], list[Edge]]:
    files = {module_name(p, root): p for p in sorted((root / PACKAGE).rglob("*.py"))}
    edges = []
    for source, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        for node, lazy in _imports(tree):
            for target in _targets(node, source, path.name == "__init__.py", set(files)):
                if target != source and target != "__future__":
                    edges.append(Edge(source, target, lazy))
    return files, sorted(set(edges), key=lambda e: (e.source, e.target, e.lazy))


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Import cycles among tracer modules (eager and lazy edges alike), each as a path a -> ... -> a."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.target.startswith(PACKAGE):
            graph.setdefault(e.source, set()).add(e.target)
    found, state = [], {}  # state: 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def _matches(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p.rstrip(".") or name.startswith(p if p.endswith(".") else p + ".") or name == p for p in prefixes)


def reachable(start: str, edges: list[Edge], lazy_first: bool) -> dict[str, list[str]]:
    """What importing start loads (eager edges), with one import path to each; with lazy_first, also
    what its own functions import lazily and what that loads. (A lazy import deeper down runs only
    when that module's function is called, which is the rule for that module to keep.)"""
    eager: dict[str, list[str]] = {}
    for e in edges:
        if not e.lazy:
            eager.setdefault(e.source, []).append(e.target)
    first = [e.target for e in edges if e.source == start and (lazy_first or not e.lazy)]
    paths = {start: [start]} | {t: [start, t] for t in first}
    todo = list(first)
    while todo:
        node = todo.pop()
        for nxt in eager.get(node, ()):
            if nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                todo.append(nxt)
    return paths


def breaches(root: Path = ROOT) -> list[str]:
    """The layering rules, one line per breach (empty: all kept)."""
    files, edges = build(root)
    out = [f"import cycle: {' -> '.join(c)}" for c in cycles(edges)]
    for module in (m for m in files if _matches(m, READING)):
        for target, path in reachable(module, edges, lazy_first=True).items():
            if _matches(target, RECORDING):
                out.append(f"reading module imports recording: {' -> '.join(path)}")
    for e in edges:
        if e.source.startswith(COMMANDS) and e.target.startswith(COMMANDS):
            out.append(f"command imports command: {e.source} -> {e.target}")
    heavy: dict[str, list[str]] = {}  # tracer.cli imports the command modules by name (importlib): each is a root too
    for start in [f"{PACKAGE}.cli", *sorted(m for m in files if m.startswith(COMMANDS))]:
        for target, path in reachable(start, edges, lazy_first=False).items():
            if _matches(target, HEAVY):
                heavy.setdefault(target, path)
    out += [f"start-up imports {t}: {' -> '.join(p)} (import it inside the function that needs it)" for t, p in heavy.items()]
    for module, path in files.items():
        lines = len(path.read_text().splitlines())
        if module.startswith(COMMANDS) and lines > MAX_COMMAND_LINES:
            out.append(f"command module over {MAX_COMMAND_LINES} lines: {path.relative_to(root)} ({lines})")
    return out


def to_dot(files: dict[str, Path], edges: list[Edge]) -> str:
    lines = ["digraph tracer {", "  rankdir=LR; node [shape=box, fontsize=10];"]
    lines += [f'  "{m}";' for m in files]
    lines += [f'  "{e.source}" -> "{e.target}"' + (" [style=dashed]" if e.lazy else "") + ";"
              for e in edges if e.target.startswith(PACKAGE)]
    return "\n".join(lines + ["}"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dot", action="store_true", help="print Graphviz DOT (lazy imports dashed)")
    ap.add_argument("--check", action="store_true", help="check the layering rules; exit 1 on a breach")
    args = ap.parse_args()
    if args.check:
        found = breaches()
        print("\n".join(found) or "import graph: no cycle, no reading -> recording arrow, thin commands")
        return 1 if found else 0
    files, edges = build()
    if args.dot:
        print(to_dot(files, edges))
        return 0
    for module in files:
        targets = [e.target + (" (lazy)" if e.lazy else "") for e in edges if e.source == module]
        print(f"{module}: {', '.join(targets) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
