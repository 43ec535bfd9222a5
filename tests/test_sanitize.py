"""compute-sanitizer wrapper: argv, parsers on real output captured on an H200
(tests/data/sanitizer, scripts/capture_sanitizer.py), verdicts, suppressions, reports."""
from __future__ import annotations

import json
import tracemalloc
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.errors import ProfileError, TraceFormatError, UsageError
from tracer.proc import ProcResult
from tracer.sanitize.argv import SanitizeOptions, Tool, build_argv, parse_tools
from tracer.sanitize.model import SanVerdict
from tracer.sanitize.parse_text import parse_text
from tracer.sanitize.parse_xml import parse_xml
from tracer.sanitize.report import to_junit, to_sarif
from tracer.sanitize.runner import filter_matches, import_outputs, kernel_filter, verdict
from tracer.sanitize.suppress import DEFAULT_FILE, apply, load_rules

UNF = DATA / "sanitizer" / "unfiltered-1024"
FIL = DATA / "sanitizer" / "filtered-128"
RULES = load_rules(DEFAULT_FILE)


def test_argv_is_built_exactly() -> None:
    opts = SanitizeOptions(tool=Tool.RACECHECK, xml_path=Path("/o/r.xml"), print_limit=50,
                           include_kernels=("kns=cast_transpose",), exclude_kernels=("kns=3at6native",))
    assert build_argv("cs", opts, ["python", "t.py"]) == [
        "cs", "--tool", "racecheck", "--xml", "--save", "/o/r.xml", "--error-exitcode", "86", "--print-limit", "50",
        "--target-processes", "all", "--racecheck-report", "analysis", "--racecheck-detect-level", "warn",
        "--kernel-name", "kns=cast_transpose", "--kernel-name-exclude", "kns=3at6native", "python", "t.py"]
    mem = build_argv("cs", SanitizeOptions(tool=Tool.MEMCHECK, xml_path=Path("m.xml"), leak_check=True), ["a"])
    assert mem[mem.index("--xml") + 1] == "--save" and ["--leak-check", "full"] == mem[-3:-1]
    assert parse_tools("all") == tuple(Tool)
    with pytest.raises(UsageError, match=r"unknown tool 'memchek' \(allowed: memcheck, racecheck"):
        parse_tools("memchek")


def test_kernel_filters_in_readable_names() -> None:
    assert kernel_filter("cast_transpose") == "kns=cast_transpose"
    assert kernel_filter("at::native::vectorized_elementwise_kernel<4>") == "kns=2at6native29vectorized_elementwise_kernel"
    mangled = {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_", "cast_transpose"}
    assert filter_matches(kernel_filter("at::native::vectorized_elementwise_kernel"), mangled)
    assert not filter_matches(kernel_filter("no_such_kernel"), mangled)
    with pytest.raises(UsageError, match="not an identifier"):
        kernel_filter("bad name!")


@pytest.mark.parametrize("stem,tool,kind,line,at_least", [
    (UNF / "memcheck-planted_oob", "memcheck", "out of bounds write", "144", 1),
    (FIL / "racecheck-analysis-planted_race", "racecheck", "WRITE-READ race", None, 16),
    (FIL / "racecheck-hazard-planted_race", "racecheck", "RAW hazard", None, 1),
    (FIL / "initcheck-planted_uninit", "initcheck", "uninitialized read", "98", 20),
    (FIL / "synccheck-planted_barrier", "synccheck", "barrier error (invalid arguments)", None, 20),
])
def test_each_tool_finds_its_planted_defect_in_xml_and_text(stem: Path, tool: str, kind: str, line: str | None, at_least: int) -> None:
    for parsed in (parse_xml(stem.with_suffix(".xml"), tool), parse_text(stem.with_suffix(".log"), tool)):
        hits = [f for f in parsed.findings if f.kind == kind and f.kernel == "cast_transpose"]
        assert sum(f.count for f in hits) >= at_least, parsed.findings
        assert all(f.source.startswith("cast_transpose.cu:") or f.source.startswith("compile") for f in hits)
        if line:
            assert any(f.source.endswith(f":{line}") for f in hits)


def test_racecheck_analysis_hazard_totals() -> None:
    p = parse_xml(FIL / "racecheck-analysis-planted_race.xml", "racecheck")
    assert p.records == 36 and sum(f.hazards for f in p.findings) == 65280
    text = parse_text(UNF / "racecheck-analysis-planted_race.log", "racecheck")
    assert text.findings and all(f.hazards >= f.count for f in text.findings)


def _res(rc: int | None, timed_out: bool = False) -> ProcResult:
    return ProcResult(argv=("cs",), returncode=rc, timed_out=timed_out, seconds=1.0, stdout_path=Path("x"), stderr_path=Path("x"))


def _run(stem: Path, tool: Tool, rc: int | None, timed_out: bool = False, label: str = "off"):
    xml = parse_xml(stem.with_suffix(".xml"), tool.value) if stem.with_suffix(".xml").is_file() else None
    return verdict(tool, stem.name, _res(rc, timed_out), xml, parse_text(stem.with_suffix(".log"), tool.value), RULES, label, {})


def test_clean_runs_are_clean_and_list_what_was_suppressed() -> None:
    for tool in Tool:
        r = _run(UNF / f"{tool.value}-clean", tool, 86 if tool is Tool.MEMCHECK else 0)
        assert r.verdict is SanVerdict.CLEAN and not r.incomplete, (tool, r.findings)
    mem = _run(UNF / "memcheck-clean", Tool.MEMCHECK, 86)
    assert [(rule, f.count) for rule, f in mem.suppressed] == [("cuda-bindings-getprocaddress-probe", 34)]
    assert mem.to_json()["suppressed"]["count"] == 34


def test_errors_then_target_crash_reports_both() -> None:
    r = _run(UNF / "memcheck-planted_oob", Tool.MEMCHECK, 86)
    assert r.verdict is SanVerdict.TARGET_FAILED and r.errors_found and r.target_failed
    assert r.target_exit is None and "masked by --error-exitcode" in " ".join(r.notes)
    assert any(f.kind == "out of bounds write" for f in r.findings)


def test_crash_with_zero_errors_is_not_clean() -> None:
    r = _run(UNF / "initcheck-crash", Tool.INITCHECK, 11)
    assert r.verdict is SanVerdict.TARGET_FAILED and not r.errors_found and r.target_exit == 11
    oob = _run(UNF / "initcheck-planted_oob", Tool.INITCHECK, 7)
    assert oob.verdict is SanVerdict.TARGET_FAILED and oob.target_exit == 7


def test_sanitizer_internal_error_is_tool_failed() -> None:
    r = _run(FIL / "racecheck-clean", Tool.RACECHECK, 86, label="on")
    assert r.verdict is SanVerdict.TOOL_FAILED and r.incomplete
    assert "Internal Sanitizer Error" in " ".join(r.notes)


def test_unprinted_errors_are_never_clean() -> None:
    r = _run(FIL / "memcheck-planted_oob", Tool.MEMCHECK, 86, label="on")
    assert r.incomplete and r.errors_found
    assert any(f.kind.startswith("not printed") and f.count == 17 for f in r.findings)


def test_filtered_initcheck_carries_the_false_positive_note() -> None:
    r = _run(FIL / "initcheck-clean", Tool.INITCHECK, 86, label="on")
    assert r.verdict is SanVerdict.ERRORS and "false positives" in " ".join(r.notes)


def test_timeout_and_missing_xml() -> None:
    stem = UNF / "synccheck-clean"
    t = verdict(Tool.SYNCCHECK, "w", _res(None, timed_out=True), parse_xml(stem.with_suffix(".xml"), "synccheck"),
                parse_text(stem.with_suffix(".log"), "synccheck"), RULES, "off", {})
    assert t.verdict is SanVerdict.TIMEOUT and t.incomplete
    missing = verdict(Tool.SYNCCHECK, "w", _res(0), None, parse_text(stem.with_suffix(".log"), "synccheck"), RULES, "off", {})
    assert missing.verdict is SanVerdict.TOOL_FAILED


def test_truncated_empty_and_foreign_xml(tmp_path: Path) -> None:
    data = (UNF / "memcheck-planted_oob.xml").read_bytes()
    cut = tmp_path / "cut.xml"
    cut.write_bytes(data[: len(data) // 2])
    p = parse_xml(cut, "memcheck")
    assert p.incomplete and 0 < p.records < 37
    empty = tmp_path / "empty.xml"
    empty.write_bytes(b"")
    assert parse_xml(empty, "memcheck").incomplete
    foreign = tmp_path / "foreign.xml"
    foreign.write_text("this is not xml at all <<<")
    with pytest.raises(TraceFormatError, match="not compute-sanitizer XML"):
        parse_xml(foreign, "memcheck")


def test_xml_entity_attacks_are_refused(tmp_path: Path) -> None:
    from defusedxml import DefusedXmlException

    bomb = tmp_path / "bomb.xml"
    bomb.write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><ComputeSanitizerOutput>&b;</ComputeSanitizerOutput>')  # noqa: E501  # one XML document as written
    with pytest.raises((DefusedXmlException, TraceFormatError)):
        parse_xml(bomb, "memcheck")


def test_100k_records_in_bounded_memory(tmp_path: Path) -> None:
    xml = (FIL / "synccheck-planted_barrier.xml").read_text()
    head, rest = xml.split("<record>", 1)
    record = "<record>" + rest.split("</record>", 1)[0] + "</record>\n"
    record = record.split("<hostStack>")[0] + record.split("</hostStack>")[1]  # keep it small: no host stack
    big = tmp_path / "big.xml"
    with open(big, "w") as fh:
        fh.write(head)
        for _ in range(100_000):
            fh.write(record)
        fh.write("</ComputeSanitizerOutput>\n")
    assert big.stat().st_size > 30_000_000
    tracemalloc.start()
    p = parse_xml(big, "synccheck")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert p.records == 100_000 and len(p.findings) == 1 and p.findings[0].count == 100_000
    assert peak < 20_000_000, peak


def test_suppression_rules(tmp_path: Path) -> None:
    from tracer.sanitize.model import Finding

    nvjet = Finding(tool="racecheck", kind="RAW hazard", kernel="nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_TNT", source="", count=2,
                    hazards=40000, level="error", message="m")
    ours = Finding(tool="racecheck", kind="RAW hazard", kernel="cast_transpose", source="cast_transpose.cu:127", count=3, hazards=3, level="error",
                   message="m")
    kept, sup = apply((nvjet, ours), RULES)
    assert kept == (ours,) and sup == (("cublas-nvjet-fp8-racecheck", nvjet),)
    bad = tmp_path / "s.yaml"
    bad.write_text("schema: 1\nsuppressions:\n  - {id: x, tool: racecheck, kernel: a}\n")
    with pytest.raises(ProfileError, match="required key 'reason' is missing"):
        load_rules(bad)
    bad.write_text("schema: 1\nsuppressions:\n  - {id: x, tool: tsan, kernel: a, reason: r}\n")
    with pytest.raises(ProfileError, match=r"key 'tool' has value 'tsan' \(allowed: memcheck"):
        load_rules(bad)


def test_junit_and_sarif_reports() -> None:
    runs = [_run(UNF / "memcheck-clean", Tool.MEMCHECK, 86), _run(FIL / "racecheck-analysis-planted_race", Tool.RACECHECK, 86),
            _run(FIL / "racecheck-clean", Tool.RACECHECK, 86, label="on")]
    suite = ET.fromstring(to_junit(runs))
    cases = suite.findall("testcase")
    assert len(cases) == 3 and suite.get("failures") == "1" and suite.get("errors") == "1"
    assert cases[1].find("failure") is not None and cases[2].find("error").get("type") == "tool-failed"
    assert "suppressed: cuda-bindings-getprocaddress-probe" in cases[0].find("system-out").text
    sarif = json.loads(to_sarif(runs, Path(__file__).resolve().parent.parent))
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["tool"]["driver"]["rules"]
    loc = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "kernels/cast_transpose.cu" and loc["region"]["startLine"] > 0


def test_import_cli_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    code = main(["sanitize", "import", str(UNF / "memcheck-planted_oob.xml"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    run = data["runs"][0]
    for key in ("tool", "verdict", "errors_found", "target_failed", "incomplete", "target_exit", "findings", "suppressed"):
        assert key in run
    assert run["verdict"] == "target-failed" and run["errors_found"] and run["target_failed"]
    assert {"kind", "kernel", "source", "count"} <= set(run["findings"][0])
    assert main(["sanitize", "import", str(UNF / "memcheck-clean.xml")]) == 0
    capsys.readouterr()
    assert main(["sanitize", "import", "/nonexistent.xml"]) == 2
    assert "neither" in capsys.readouterr().err


def test_import_uses_text_log_alone() -> None:
    r = import_outputs(UNF / "racecheck-analysis-planted_race.log", None, RULES)
    assert r.tool == "racecheck" and r.verdict is SanVerdict.ERRORS
