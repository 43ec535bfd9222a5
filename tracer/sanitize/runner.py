"""Run compute-sanitizer on a target and turn its outputs into a verdict a reviewer can trust."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from tracer import proc
from tracer.errors import ToolMissingError, TraceFormatError, UsageError
from tracer.sanitize.argv import ERROR_EXITCODE, SanitizeOptions, Tool, build_argv
from tracer.sanitize.model import Finding, Parsed, SanVerdict, ToolRun
from tracer.sanitize.parse_text import parse_text
from tracer.sanitize.parse_xml import parse_xml
from tracer.sanitize.suppress import Rule, apply
from tracer.sanitize.tools import FALLBACK, tool_in_name
from tracer.store.inputs import check_file

IDENT = re.compile(r"[A-Za-z_]\w*")


def find_sanitizer() -> str:
    found = shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if Path(p).is_file()), None)
    if not found:
        raise ToolMissingError("compute-sanitizer not found: install the CUDA toolkit or put compute-sanitizer on PATH")
    return found


def kernel_filter(readable: str) -> str:
    """A readable kernel name -> compute-sanitizer's filter on the mangled name: a plain identifier
    is a substring of its own mangled form; a qualified a::b::k becomes the length-prefixed 1a1b1k."""
    base = readable.split("(")[0].split("<")[0].strip()
    parts = [p for p in base.split("::") if p]
    if not parts or not all(IDENT.fullmatch(p) for p in parts):
        raise UsageError(f"kernel name {readable!r} is not an identifier or a qualified name like ns::kernel")
    if len(parts) == 1:
        return f"kns={parts[0]}"
    return "kns=" + "".join(f"{len(p)}{p}" for p in parts)


def filter_matches(flt: str, mangled_names: set[str]) -> bool:
    needle = flt.split("=", 1)[1]
    return any(needle in name for name in mangled_names)


def verdict(tool: Tool, workload: str, res: proc.ProcResult, xml: Parsed | None, text: Parsed,
            rules: tuple[Rule, ...], filter_label: str, files: dict[str, str], *, has_text: bool = True) -> ToolRun:
    """The most serious verdict that applies. Imported outputs have no exit code (returncode None,
    not timed out); `has_text` False: no text output, so the target's exit and the totals are unknown."""
    rc = None if res.timed_out else res.returncode
    imported = rc is None and not res.timed_out
    tool_errors = text.tool_errors + (xml.tool_errors if xml is not None else ())
    tool_failed = bool(tool_errors) or (xml is None and not imported and not res.timed_out) or (rc is not None and rc < 0)
    target_failed = text.target_error or (rc not in (0, ERROR_EXITCODE, None) and not tool_failed)
    source = xml if xml is not None and xml.records >= text.records else text
    kept, suppressed = apply(source.findings, rules)
    kept += unseen_findings(tool, source, text)  # never suppressed: they may be anything
    gaps = incompleteness(res, rc, xml, text, source, tool_failed, has_text)
    notes = gaps + _notes(tool, filter_label, kept, tool_errors, target_failed, rc)
    if not has_text:
        notes.append("no text output (FILE.log, FILE.txt or --log): the target's exit and the tool's totals are unknown")
    if text.unparsed:
        notes.append(f"{text.unparsed} line(s) of the tool's own that no pattern reads (any may be an error): see the text output")
    order = [(tool_failed, SanVerdict.TOOL_FAILED), (res.timed_out, SanVerdict.TIMEOUT),
             (target_failed, SanVerdict.TARGET_FAILED), (bool(kept), SanVerdict.ERRORS), (bool(gaps), SanVerdict.INCOMPLETE),
             (not has_text, SanVerdict.NO_ERRORS_RECORDED)]
    v = next((verdict for cond, verdict in order if cond), SanVerdict.CLEAN)
    target_exit = rc if rc not in (ERROR_EXITCODE, None) else None
    return ToolRun(tool=tool, workload=workload, verdict=v, errors_found=bool(kept), target_failed=target_failed, incomplete=bool(gaps),
                   target_exit=target_exit, sanitizer_exit=rc, findings=kept, suppressed=suppressed,
                   reported_errors=text.reported_errors, seconds=res.seconds, filter=filter_label, files=files, notes=tuple(notes))


def unaccounted(source: Parsed, text: Parsed) -> int:
    """Errors the tool's summary counts beyond the records read (and those it said it did not print)."""
    if text.reported_errors is None:
        return 0
    seen = max(source.records, sum(f.hazards for f in source.findings)) + text.not_printed
    return max(0, text.reported_errors - seen)


def unseen_findings(tool: Tool, source: Parsed, text: Parsed) -> tuple[Finding, ...]:
    """Records counted but not read: each is a finding of its own, never clean."""
    out = []
    if text.not_printed:
        out.append(Finding(tool=tool.value, kind="not printed (raise --print-limit)", kernel="?", source="", count=text.not_printed,
                           hazards=text.not_printed, level="error", message=f"{text.not_printed} errors were not printed"))
    missing = unaccounted(source, text)
    if missing:
        out.append(Finding(tool=tool.value, kind="counted but not read", kernel="?", source="", count=missing, hazards=missing, level="error",
                           message=f"the tool's summary counts {text.reported_errors} errors; {missing} of them are in no record read"))
    return tuple(out)


def incompleteness(res: proc.ProcResult, rc: int | None, xml: Parsed | None, text: Parsed, source: Parsed,
                   tool_failed: bool, has_text: bool) -> list[str]:
    """Why the outputs cannot prove the run was checked end to end (empty: they can)."""
    missing = unaccounted(source, text)
    reasons = [
        (res.timed_out, "killed at the timeout"),
        (tool_failed, "the sanitizer failed"),
        (xml is not None and xml.incomplete, "the XML is empty, truncated or malformed (read as far as it goes)"),
        (text.not_printed > 0, f"{text.not_printed} errors were not printed (raise --print-limit)"),
        (missing > 0, f"the tool counted {text.reported_errors} errors but {missing} are in no record read"),
        (has_text and not res.timed_out and not tool_failed and text.reported_errors is None,
         "the text output has no ERROR SUMMARY: the tool did not finish"),
        (rc == ERROR_EXITCODE and source.records == 0 and not text.reported_errors and not text.target_error,
         f"the sanitizer exited {ERROR_EXITCODE} (errors found) but no error was recorded"),
    ]
    return [why for cond, why in reasons if cond]


def _notes(tool: Tool, filter_label: str, kept: tuple[Finding, ...], tool_errors: tuple[str, ...],
           target_failed: bool, rc: int | None) -> list[str]:
    notes = []
    if tool_errors:
        notes.append("; ".join(dict.fromkeys(tool_errors)))
    if tool.spec.filter_note and filter_label == "on" and kept:
        notes.append(tool.spec.filter_note)
    if target_failed and rc == ERROR_EXITCODE:
        notes.append("the target failed; its own exit code is masked by --error-exitcode")
    return notes


def run_tool(binary: str, opts: SanitizeOptions, target: list[str], out: Path, workload: str,
             rules: tuple[Rule, ...], timeout: float, filter_label: str) -> ToolRun:
    stem = opts.xml_path.stem  # "memcheck-w.variant-off": its dots are no suffix to replace
    log, err = opts.xml_path.with_name(f"{stem}.log"), opts.xml_path.with_name(f"{stem}.stderr")
    res = proc.run(build_argv(binary, opts, target), timeout=timeout, stdout_path=log, stderr_path=err)
    xml = own_xml(opts.xml_path, opts.tool.value)
    text = parse_text(log, opts.tool.value)
    files = {"xml": opts.xml_path.name, "log": log.name, "stderr": err.name}
    return verdict(opts.tool, workload, res, xml, text, rules, filter_label, files)


def own_xml(path: Path, tool: str) -> Parsed | None:
    """The XML this run asked the tool to write: None when there is none; cut before its root
    element, it is still the tool's (truncated), so incomplete rather than foreign."""
    if not path.is_file():
        return None
    try:
        return parse_xml(path, tool)
    except TraceFormatError:
        return Parsed(findings=(), records=0, incomplete=True)


def import_outputs(path: Path, tool: str | None, rules: tuple[Rule, ...], log: Path | None = None) -> ToolRun:
    """A verdict from outputs made elsewhere: FILE.xml with its text output (`log`, else FILE.log or
    FILE.txt beside it), or a text output alone. A text file with no compute-sanitizer line is refused."""
    from tracer.sanitize.parse_text import detect_tool

    xml_path, log_path = import_paths(path, log)
    named = tool_in_name(path.name)
    name = tool or (named.value if named else None) or (detect_tool(log_path) if log_path is not None else None) or FALLBACK.value
    text = parse_text(log_path, name) if log_path is not None else Parsed(findings=(), records=0, incomplete=False)
    if log_path is not None and not text.recognised:
        raise TraceFormatError(f"{log_path}: not compute-sanitizer output (no line of the tool's own; "
                               "give the tool's XML (--xml --save) or its text output)")
    xml = parse_xml(xml_path, name) if xml_path is not None else None
    res = proc.ProcResult(argv=(), returncode=None, timed_out=False, seconds=0.0, stdout_path=path,
                          stderr_path=path)  # the exit code is not known for imported output
    files = {k: str(p) for k, p in (("xml", xml_path), ("log", log_path)) if p is not None}
    return verdict(Tool(name), path.stem, res, xml, text, rules, "unknown", files, has_text=log_path is not None)


def import_many(paths: list[Path], tool: str | None, rules: tuple[Rule, ...], log: Path | None = None) -> list[ToolRun]:
    """import_outputs of each file; a folder stands for its .xml files (refused when it has none)."""
    files = [f for p in paths for f in import_files(p)]
    if log is not None and len(files) > 1:
        raise UsageError(f"--log goes with one XML file; {len(files)} files were given ({', '.join(f.name for f in files[:3])}...)")
    return [import_outputs(f, tool, rules, log) for f in files]


def import_files(path: Path) -> list[Path]:
    """The file, or a folder's .xml files (sorted): the text output beside each is found by import_paths."""
    if not path.is_dir():
        return [path]
    xml = sorted(path.glob("*.xml"))
    if not xml:
        others = sorted(p.name for p in path.iterdir())[:5]
        raise UsageError(f"{path}: a folder with no compute-sanitizer .xml file in it (found: {', '.join(others) or 'nothing'}); "
                         "give FILE.xml or a text log, or `tracer report DIR` for a `tracer sanitize` output folder")
    return xml


def import_paths(path: Path, log: Path | None) -> tuple[Path | None, Path | None]:
    """(XML, text output) for `sanitize import PATH [--log LOG]`; None where there is none."""
    if path.suffix != ".xml":
        if log is not None:
            raise UsageError(f"--log goes with an XML file; {path} is read as the text output itself")
        xml = path.with_suffix(".xml")
        if not _given(path):
            raise UsageError(f"{path}: neither {xml.name} nor {path.name} exists")
        return (xml if xml.is_file() else None), path
    if log is not None and not _given(log):
        raise UsageError(f"--log {log}: no such file")
    beside = [path.with_suffix(s) for s in (".log", ".txt")]
    text = log or next((p for p in beside if _given(p)), None)  # a FIFO or folder there is named, never 'no text output'
    if not _given(path):
        raise UsageError(f"{path}: neither {path.name} nor {beside[0].name} exists")
    return path, text


def _given(path: Path) -> bool:
    """Whether a path the user named is there; a FIFO, device or directory is refused, naming it."""
    if not os.path.lexists(path):
        return False
    check_file(path, "compute-sanitizer output (XML or text)")
    return True

