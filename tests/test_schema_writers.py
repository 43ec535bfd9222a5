"""Every place in tracer/ that writes JSON (json.dump/dumps, write_json, a JSONResponse, a cached
API answer) is registered here with the kind of document it writes, whose schema ships in
tracer/data/schemas, or the reason it has none. Found by walking the code's syntax trees, so a
new writer, or one more write in a registered function, fails until it is registered; a stale
entry fails too. Keys are (module file stem, function qualname): stable when modules move."""
from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from tests.conftest import ROOT
from tracer.schemas import KINDS, PROFILE_KIND

# Why some JSON has no schema: none of it is a document for people or programs to read.
MARKER = "the per-process marker (procs/*.json): tracer/format/marker.py and its own schema"
STORE = "a column of tracer's own SQLite store, read back only by tracer"
INTERNAL = "handed from tracer to its own processes or cache, never kept in a run directory"
FOREIGN = "another tool's format, with its own schema"
TEXT = "shown as text in the HTML report, not a JSON file"
HELPER = "writes what its callers give it: the callers are registered"
UI = "drawn by tracer serve's own web pages only; changes with them (not a contract)"
REASONS = (MARKER, STORE, INTERNAL, FOREIGN, TEXT, HELPER, UI)
VERDICT = "verdict|job"  # trace analysis: one trace's verdict, or a job's

WRITERS: dict[tuple[str, str], tuple[str, ...]] = {
    # run directories
    ("trace_run", "record"): ("command", "environment", VERDICT),
    ("trace_run", "import_run"): ("command", VERDICT),
    ("session", "record"): ("command", "environment", PROFILE_KIND),  # ncu/session.py
    ("session", "import_report"): ("command", PROFILE_KIND),
    ("plan", "run_into"): ("command",),
    ("report", "to_json"): ("sanitize",),  # report.json and sanitize --json
    # printed by commands
    ("trace", "finish"): (VERDICT,),
    ("diff", "cmd_diff"): ("diff",),
    ("doctor", "cmd_doctor"): ("doctor",),
    ("run", "cmd_run"): ("workload-run",),
    ("campaign", "cmd_report"): ("campaign-report",),
    ("profile", "show_run"): (PROFILE_KIND,),
    ("session", "comparison"): ("profile-compare",),
    # tracer serve
    ("app", "_error"): ("error",),
    ("app", "build_app.api_session"): ("session",),
    ("app", "build_app.api_runs"): ("run-list",),
    ("app", "build_app.list_page.make"): ("run-list",),  # the first page of rows, served inside the list page
    ("pages", "render"): (UI,),  # the list page's filter state, read back by its own script
    ("app", "build_app.api_run"): ("campaign-report", "verdict|job|sanitize|tracer-profile|campaign-report"),
    ("runs", "verdict_json"): ("campaign-report",),
    ("app", "build_app.api_run_summary"): ("run-summary",),
    ("app", "build_app.api_jobs"): ("job-list",),
    ("app", "build_app.api_submit"): ("queued-job",),
    ("app", "build_app.api_job"): ("queued-job",),
    ("app", "build_app.api_cancel"): ("queued-job",),
    ("app", "build_app.api_import"): ("queued-job",),
    ("app", "build_app.api_diff"): ("diff",),
    ("app", "build_app.api_timeline"): (UI,),
    ("app", "build_app.api_search"): (UI,),
    ("app", "Answers.get"): (HELPER,),
    ("atomic", "write_json"): (HELPER,),
    ("rundir", "write_json"): (HELPER,),
    # not documents
    ("launcher", "settle"): (MARKER,),
    ("session", "write_json"): (MARKER,),  # capture/session.py
    ("session", "write_marker"): (MARKER,),  # every marker write of capture/session.py goes through it
    ("trials_db", "Store.init"): (STORE, STORE),  # the campaign's profile and environment
    ("trials_db", "Store.mark_inflight"): (STORE,),
    ("trials_db", "Store.record_crash"): (STORE,),
    ("index", "RunIndex._store"): (STORE, STORE),
    ("jobs", "JobQueue.submit"): (STORE, STORE),
    ("nsys_schema", "TraceWriter._append"): (STORE,),  # a trace's META_DATA_EXPORT row
    ("executors", "LocalExecutor._start"): (INTERNAL,),  # the tasks of a local worker
    ("options", "CaptureOptions.to_env"): (INTERNAL,),  # capture options for the traced processes
    ("nsys_libs", "prepare"): (INTERNAL,),  # where the cached elfutils libraries came from
    ("timeline", "_save"): (INTERNAL,),  # the web timeline's cache (.npz)
    ("perfetto", "write_perfetto"): (FOREIGN,),  # Chrome trace event format, for ui.perfetto.dev
    ("report", "to_sarif"): (FOREIGN,),  # SARIF 2.1.0
    ("build", "add_trace"): (TEXT,),
    ("build", "add_job"): (TEXT,),
}


def _writer(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "json":
        return f.attr in ("dump", "dumps")
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    if name in ("write_json", "JSONResponse"):
        return True
    return name == "get" and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and f.value.attr == "answers"


def json_writers(package: Path) -> tuple[Counter[tuple[str, str]], dict[tuple[str, str], set[str]]]:
    """(writes per (module stem, function qualname), the files each key was found in)."""
    found: Counter[tuple[str, str]] = Counter()
    files: dict[tuple[str, str], set[str]] = {}

    def visit(node: ast.AST, path: Path, stack: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, path, [*stack, child.name])
                continue
            if isinstance(child, ast.Call) and _writer(child):
                key = (path.stem, ".".join(stack) or "<module>")
                found[key] += 1
                files.setdefault(key, set()).add(str(path.relative_to(package.parent)))
            visit(child, path, stack)

    for path in sorted(package.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8")), path, [])
    return found, files


def breaches(package: Path) -> list[str]:
    found, files = json_writers(package)
    out = [f"{'/'.join(sorted(files[k]))}: {k[1]} writes JSON {n} time(s): register it in tests/test_schema_writers.py "
           f"with its kind (and ship a schema) or the reason it has none" for k, n in found.items() if len(WRITERS.get(k, ())) != n]
    out += [f"{k} is registered but writes no JSON any more" for k in WRITERS if k not in found]
    out += [f"{k} names functions in several files: {sorted(v)}" for k, v in files.items() if len(v) > 1]
    return out


def test_every_json_writer_is_registered_with_a_kind_or_a_reason() -> None:
    assert breaches(ROOT / "tracer") == []


def test_registered_kinds_have_schemas_tests_and_docs() -> None:
    written = {k for entry in WRITERS.values() for e in entry if e not in REASONS for k in e.split("|")}
    assert written == set(KINDS) - {"ablation"}  # an ablation JSON is read, and shipped with the demo, not written
    tests = (ROOT / "tests" / "test_schemas.py").read_text()
    contracts = (ROOT / "docs" / "json.md").read_text()
    for kind in KINDS:
        assert re.search(rf'"{kind}"', tests) or kind == PROFILE_KIND, f"{kind}: no test validates it"
        assert f"| `{kind}` |" in contracts, f"{kind}: not in the table of docs/json.md"


def test_a_new_writer_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "tracer"
    (pkg / "commands").mkdir(parents=True)
    (pkg / "commands" / "diff.py").write_text("import json\n\ndef cmd_diff(d):\n    print(json.dumps(d))\n")
    (pkg / "novel.py").write_text("import json\n\nclass A:\n    def save(self, path):\n        json.dump({}, open(path, 'w'))\n")
    (pkg / "trace.py").write_text("def finish(a):\n    write_json('x', a)\n    write_json('y', a)\n")
    got = breaches(pkg)
    assert any(line.startswith("tracer/novel.py: A.save writes JSON 1 time(s)") for line in got), got
    assert any(line.startswith("tracer/trace.py: finish writes JSON 2 time(s)") for line in got), got  # one more than registered
    assert not any("cmd_diff" in line and "writes JSON" in line for line in got)
    assert any("('app', '_error') is registered but writes no JSON" in line for line in got)
