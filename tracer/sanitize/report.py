"""Sanitizer verdicts as text, JSON, JUnit XML (one test case per tool x workload) and SARIF 2.1.0."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from tracer import __version__, resources
from tracer.errors import UsageError
from tracer.sanitize.model import SanVerdict, ToolRun
from tracer.textsafe import lines_text, shown

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SOURCE_ROOT = resources.KERNEL_DIR.parent  # SARIF locations are relative to it (kernels/...)


def format_text(runs: Sequence[ToolRun]) -> str:
    lines = [f"{'tool':<10} {'workload':<24} {'filter':<7} {'verdict':<14} {'findings':>9} {'suppressed':>11}  notes"]
    for r in runs:
        sup = sum(f.count for _, f in r.suppressed)
        lines.append(f"{r.tool.value:<10} {r.workload:<24} {r.filter:<7} {r.verdict.value:<14} "
                     f"{sum(f.count for f in r.findings):>9} {sup:>11}  "
                     + "; ".join(([f"target exit {r.target_exit}"] if r.target_failed and r.target_exit is not None else [])
                                 + (["errors found before the target failed"] if r.errors_found and r.target_failed else [])
                                 + (["INCOMPLETE"] if r.incomplete else []) + list(r.notes)))
        for f in r.findings[:8]:
            hz = f" ({f.hazards} hazards)" if f.hazards != f.count else ""
            lines.append(f"    {f.count:>7} x {f.kind} in {f.kernel or '?'} at {f.source or '?'}{hz}")
        if len(r.findings) > 8:
            lines.append(f"    ... {len(r.findings) - 8} more groups (--json lists all)")
        for rule, f in r.suppressed[:4]:
            lines.append(f"    suppressed by {rule}: {f.count} x {f.kind} in {f.kernel}")
    return lines_text(lines)


def to_json(runs: Sequence[ToolRun]) -> str:
    from tracer.schemas import header

    return json.dumps({**header("sanitize"), "tracer": __version__, "runs": [r.to_json() for r in runs]}, indent=1)


def to_junit(runs: Sequence[ToolRun]) -> str:
    suite = ET.Element("testsuite", name="tracer-sanitize", tests=str(len(runs)),
                       failures=str(sum(r.verdict is SanVerdict.ERRORS for r in runs)),
                       errors=str(sum(r.verdict not in (SanVerdict.ERRORS, SanVerdict.CLEAN) for r in runs)))
    for r in runs:
        case = ET.SubElement(suite, "testcase", classname=f"sanitize.{r.tool.value}", name=f"{r.tool.value}:{r.workload}:{r.filter}",
                             time=f"{r.seconds:.2f}")
        summary = "; ".join(f"{f.count} x {f.kind} in {f.kernel} at {f.source}" for f in r.findings[:20])
        if r.verdict is SanVerdict.ERRORS:
            ET.SubElement(case, "failure", message=f"{len(r.findings)} finding group(s)", type="errors").text = summary
        elif r.verdict is not SanVerdict.CLEAN:
            ET.SubElement(case, "error", message=r.verdict.value, type=r.verdict.value).text = "; ".join(r.notes) or summary
        if r.suppressed:
            ET.SubElement(case, "system-out").text = "suppressed: " + "; ".join(f"{rule}: {f.count} x {f.kind} in {f.kernel}"
                                                                                 for rule, f in r.suppressed)
    for el in suite.iter():  # names from the target: no XML-invalid character reaches the file
        el.text = shown(el.text) if el.text is not None else None
        el.attrib.update({k: shown(v) for k, v in el.attrib.items()})
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def _location(source: str, root: Path | None) -> list[dict[str, object]]:
    if ":" not in source:
        return []
    path, line = source.rsplit(":", 1)
    if not (line.isascii() and line.isdigit()):  # str.isdigit takes '²', which int() refuses
        return []
    uri = path
    if root is not None and (root / "kernels" / Path(path).name).is_file():
        uri = f"kernels/{Path(path).name}"
    return [{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": int(line)}}}]


def to_sarif(runs: Sequence[ToolRun], root: Path | None = None) -> str:
    rules: dict[str, dict[str, object]] = {}
    results = []
    for r in runs:
        for f in r.findings:
            rule_id = f"{r.tool.value}/{f.kind}"
            rules.setdefault(rule_id, {"id": rule_id, "shortDescription": {"text": f"compute-sanitizer {r.tool.value}: {f.kind}"},
                                       "fullDescription": {"text": f"{r.tool.value} checks {r.tool.spec.title}"}})
            results.append({
                "ruleId": rule_id, "level": "warning" if f.level == "warning" else "error",
                "message": {"text": f"{f.message} ({f.count} records in {f.kernel or '?'}, workload {r.workload})"},
                "locations": _location(f.source, root),
                "properties": {"kernel": f.kernel, "count": f.count, "hazards": f.hazards, "workload": r.workload},
            })
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "tracer sanitize (compute-sanitizer)", "version": __version__,
                            "informationUri": "https://docs.nvidia.com/compute-sanitizer/", "rules": list(rules.values())}},
        "results": results}]}
    return json.dumps(doc, indent=1)


def guard_reports(junit: Path | None, sarif: Path | None, inputs: Sequence[Path | str | None]) -> None:
    """--junit and --sarif never overwrite what the command reads (the XML and the text log beside
    it, suppressions, a profile), nor each other: checked before anything runs."""
    from tracer.store.outpath import guard_output

    read = [Path(p) for p in inputs if p]
    xml = Path(inputs[0]) if inputs and inputs[0] else None
    if xml is not None:
        read += [xml.with_suffix(".log"), xml.with_suffix(".txt")]
    outs = [p for p in (junit, sarif) if p is not None]
    for out in outs:
        guard_output(out, read)
    if len(outs) == 2 and outs[0].resolve() == outs[1].resolve():
        raise UsageError(f"--junit and --sarif both name {outs[0]}; give two files")


def write_reports(runs: Sequence[ToolRun], junit: Path | None, sarif: Path | None,
                  inputs: Sequence[Path | str | None] = ()) -> None:
    """The JUnit and SARIF files asked for, each written under a temporary name and renamed; none
    is the same file as an input (guard_reports)."""
    from tracer.store.atomic import write_text

    guard_reports(junit, sarif, inputs)
    if junit is not None:
        write_text(junit, to_junit(runs), make_folder=False)
    if sarif is not None:
        write_text(sarif, to_sarif(runs, SOURCE_ROOT), make_folder=False)


def raise_if_not_clean(runs: Sequence[ToolRun]) -> None:
    """TimedOut (exit 8) when runs were killed at --timeout and none found an error; ChecksFailed
    (exit 1) when any run is not clean."""
    from tracer.errors import ChecksFailed, TimedOut

    timed_out = sum(r.verdict is SanVerdict.TIMEOUT for r in runs)
    if timed_out and not any(r.errors_found for r in runs):
        raise TimedOut(f"{timed_out} of {len(runs)} sanitizer run(s) killed at --timeout")
    if not_clean(runs):
        raise ChecksFailed(not_clean(runs))


def not_clean(runs: Sequence[ToolRun]) -> str:
    """Why these runs fail a check ("" when every one is clean)."""
    bad = [r for r in runs if r.verdict is not SanVerdict.CLEAN]
    return f"{len(bad)} of {len(runs)} sanitizer run(s) not clean" if bad else ""
