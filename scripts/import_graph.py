"""The import graph of tracer/ from the source (stdlib ast only: nothing is imported or run).

    python scripts/import_graph.py            # one line per module: what it imports (lazy ones marked)
    python scripts/import_graph.py --dot      # Graphviz: dot -Tsvg -o imports.svg
    python scripts/import_graph.py --check    # the layering rules; exit 1 and one line per breach

An edge is eager (module level), lazy (inside a function) or typing (under `if TYPE_CHECKING:`).
Cycles are looked for over all three, between modules and between packages: a lazy or typing
import hides a dependency, it does not remove it. What a module loads (start-up cost, reading ->
recording) follows only the edges that run. tests/test_architecture.py runs the same checks.
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
READING = ("tracer.artifact", "tracer.readers.", "tracer.model.", "tracer.analysis.", "tracer.sanitize.parse_",
           "tracer.sanitize.model", "tracer.views.", "tracer.compare.", "tracer.format.",
           # the use cases that only read (the service serves them on a machine with no GPU); trace_run captures
           "tracer.app.diff", "tracer.app.runs", "tracer.app.timeline", "tracer.app.demo")
RECORDING = ("tracer.capture.", "tracer.kernel.launch", "tracer.proc", "torch", "cuda", "cupti")
HEAVY = ("scipy", "cuda", "torch", "matplotlib", "rich")  # never imported at start-up (command modules import them lazily)
COMMANDS = "tracer.commands."
# Capture only records: it writes the on-disk formats (tracer.format) and never reads, analyses or
# orchestrates (that is tracer.app, which the commands and the service call).
CAPTURE, CAPTURE_NEVER = "tracer.capture", ("tracer.readers", "tracer.model", "tracer.analysis", "tracer.artifact", "tracer.app", "tracer.commands")
APP_USERS = ("tracer.app", "tracer.commands", "tracer.serve", "tracer.cli")  # the only importers of tracer.app
# The formats read what they define through the bounded readers (tracer.store.inputs, tracer.jsonkeys).
FORMAT, FORMAT_MAY = "tracer.format", ("tracer.format", "tracer.errors", "tracer.store.inputs", "tracer.jsonkeys")
MAX_COMMAND_LINES = 100


@dataclass(frozen=True)
class Edge:
    source: str
    target: str  # a tracer module, or an external top-level package
    lazy: bool
    typing: bool = False  # under `if TYPE_CHECKING:`: never runs, but still a dependency


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement with whether it runs lazily (inside a function) and whether it sits
    under `if TYPE_CHECKING:`."""
    def walk(node: ast.AST, lazy: bool, typing: bool) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                yield from (x for n in child.body for x in walk_one(n, lazy, True))
                yield from (x for n in child.orelse for x in walk_one(n, lazy, typing))
                continue
            yield from walk_one(child, lazy, typing)

    def walk_one(node: ast.AST, lazy: bool, typing: bool) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy, typing
        else:
            yield from walk(node, lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)), typing)

    yield from walk(tree, False, False)


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
        for node, lazy, typing in _imports(tree):
            for target in _targets(node, source, path.name == "__init__.py", set(files)):
                if target != source and target != "__future__":
                    edges.append(Edge(source, target, lazy, typing))
    return files, sorted(set(edges), key=lambda e: (e.source, e.target, e.lazy, e.typing))


def package_of(module: str) -> str:
    """tracer.analysis.hazards -> tracer.analysis; a top-level module is its own package."""
    return ".".join(module.split(".")[:2])


def cycles(edges: list[Edge], packages: bool = False) -> list[list[str]]:
    """Import cycles among tracer modules (or, with packages, among tracer's packages) over every
    edge, lazy and typing ones too, each as a path a -> ... -> a."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.target.startswith(PACKAGE):
            a, b = (package_of(e.source), package_of(e.target)) if packages else (e.source, e.target)
            if a != b:
                graph.setdefault(a, set()).add(b)
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
        if not e.lazy and not e.typing:
            eager.setdefault(e.source, []).append(e.target)
    first = [e.target for e in edges if e.source == start and not e.typing and (lazy_first or not e.lazy)]
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
    out += [f"package cycle: {' -> '.join(c)}" for c in cycles(edges, packages=True)]
    out += _direction_breaches(edges)
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


def _direction_breaches(edges: list[Edge]) -> list[str]:
    """Arrows that must not exist, lazy and typing ones included."""
    out = []
    for e in edges:
        kind = " (typing)" if e.typing else " (lazy)" if e.lazy else ""
        arrow = f"{e.source} -> {e.target}{kind}"
        if _matches(e.source, (CAPTURE,)) and _matches(e.target, CAPTURE_NEVER):
            out.append(f"capture imports {package_of(e.target)}: {arrow}")
        if _matches(e.target, ("tracer.app",)) and not _matches(e.source, APP_USERS):
            out.append(f"only commands and the service import tracer.app: {arrow}")
        if _matches(e.source, (FORMAT,)) and e.target.startswith(PACKAGE) and not _matches(e.target, FORMAT_MAY):
            out.append(f"tracer.format imports {e.target}: {arrow}")
    return out


def to_dot(files: dict[str, Path], edges: list[Edge]) -> str:
    lines = ["digraph tracer {", "  rankdir=LR; node [shape=box, fontsize=10];"]
    lines += [f'  "{m}";' for m in files]
    lines += [f'  "{e.source}" -> "{e.target}"' + (" [style=dotted]" if e.typing else " [style=dashed]" if e.lazy else "") + ";"
              for e in edges if e.target.startswith(PACKAGE)]
    return "\n".join(lines + ["}"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dot", action="store_true", help="print Graphviz DOT (lazy imports dashed)")
    ap.add_argument("--check", action="store_true", help="check the layering rules; exit 1 on a breach")
    args = ap.parse_args()
    if args.check:
        found = breaches()
        print("\n".join(found) or "import graph: no module or package cycle, no reading -> recording arrow, capture records only, thin commands")
        return 1 if found else 0
    files, edges = build()
    if args.dot:
        print(to_dot(files, edges))
        return 0
    for module in files:
        targets = [e.target + (" (typing)" if e.typing else " (lazy)" if e.lazy else "") for e in edges if e.source == module]
        print(f"{module}: {', '.join(targets) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
