"""A compute-sanitizer tool is described once (tracer/sanitize/tools.py): the command line, the
parsers, the self-test, the reports and doctor take what differs between tools from its entry,
and no other module names a tool."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import DATA
from tracer.kernel.spec import Variant
from tracer.sanitize.argv import SanitizeOptions, build_argv, parse_tools
from tracer.sanitize.parse_text import detect_tool
from tracer.sanitize.selftest import PLANTED
from tracer.sanitize.tools import FALLBACK, TOOL_OF_KIND, Tool, tool_in_name, tool_of_text

ROOT = Path(__file__).resolve().parent.parent


def test_each_entry_is_complete_and_its_names_are_its_own() -> None:
    kinds = [k for t in Tool for k in t.spec.xml_kinds]
    assert len(kinds) == len(set(kinds)) == len(TOOL_OF_KIND) >= 7
    for t in Tool:
        assert t.spec.title and t.spec.xml_kinds and Variant(t.spec.planted).planted
        assert Tool(t.value) is t and PLANTED[t.spec.planted] is t
    signed = [t for t in Tool if t.spec.text_signs]
    assert FALLBACK not in signed and len(signed) == len(Tool) - 1  # a log naming no tool reads as the fallback


def test_argv_takes_each_tools_own_flags_from_its_entry(tmp_path: Path) -> None:
    def argv(tool: Tool, **kw: object) -> list[str]:
        return build_argv("cs", SanitizeOptions(tool=tool, xml_path=tmp_path / "x.xml", **kw), ["prog"])  # type: ignore[arg-type]  # keywords of SanitizeOptions

    assert argv(Tool.MEMCHECK, leak_check=True)[-3:] == ["--leak-check", "full", "prog"]
    assert "--leak-check" not in argv(Tool.RACECHECK, leak_check=True)
    assert argv(Tool.RACECHECK, racecheck_report="hazard")[-5:] == [
        "--racecheck-report", "hazard", "--racecheck-detect-level", "warn", "prog"]
    assert all(argv(t)[:3] == ["cs", "--tool", t.value] for t in Tool)
    assert parse_tools("all") == tuple(Tool)


def test_real_text_logs_name_their_tool() -> None:
    logs = sorted(p for p in (DATA / "sanitizer").rglob("*.log") if tool_in_name(p.name))
    assert len(logs) >= 4
    detected = {}
    for log in logs:
        named, found = tool_in_name(log.name), detect_tool(log)
        assert named is not None and found in (None, named.value), log  # a clean log names no tool; none names another
        detected[log.name] = found
    assert {d for d in detected.values() if d} == {t.value for t in Tool if t.spec.text_signs}, detected
    assert tool_of_text("========= RACECHECK SUMMARY: 0 hazards displayed") is Tool.RACECHECK


def test_no_module_but_the_table_names_a_tool() -> None:
    names = {t.value for t in Tool} | {k for t in Tool for k in t.spec.xml_kinds if k not in ("Hazard", "Analysis")}
    found = []
    for path in sorted((ROOT / "tracer").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("tracer/sanitize/tools.py", "tracer/sanitize/parse_xml.py"):  # the parser reads each record kind's fields
            continue
        strings = {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        found += [f"{rel}: {s!r}" for s in sorted(strings & names)]
    assert not found, found
