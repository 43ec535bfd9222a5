"""Run compute-sanitizer on a target and turn its outputs into a verdict a reviewer can trust."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from tracer import proc
from tracer.errors import ToolMissingError, UsageError
from tracer.sanitize.argv import ERROR_EXITCODE, SanitizeOptions, Tool, build_argv
from tracer.sanitize.model import Finding, Parsed, SanVerdict, ToolRun
from tracer.sanitize.parse_text import parse_text
from tracer.sanitize.parse_xml import parse_xml
from tracer.sanitize.suppress import Rule, apply

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
            rules: tuple[Rule, ...], filter_label: str, files: dict[str, str]) -> ToolRun:
    rc = None if res.timed_out else res.returncode
    notes = []
    tool_errors = text.tool_errors + (xml.tool_errors if xml is not None else ())
    tool_failed = bool(tool_errors) or (xml is None and not res.timed_out) or (rc is not None and rc < 0)
    target_failed = text.target_error or (rc not in (0, ERROR_EXITCODE, None) and not tool_failed)
    source = xml if xml is not None and xml.records >= text.records else text
    kept, suppressed = apply(source.findings, rules)
    if text.not_printed:  # unseen records may be anything: they are never suppressed
        kept += (Finding(tool.value, "not printed (raise --print-limit)", "?", "", text.not_printed,
                         text.not_printed, "error", f"{text.not_printed} errors were not printed"),)
    incomplete = res.timed_out or tool_failed or (xml is not None and xml.incomplete) or text.not_printed > 0
    if text.not_printed:
        notes.append(f"{text.not_printed} errors were not printed (raise --print-limit)")
    elif text.reported_errors is not None and text.reported_errors > source.records:
        notes.append(f"the tool counted {text.reported_errors} errors in {source.records} printed records")
    if tool_errors:
        notes.append("; ".join(dict.fromkeys(tool_errors)))
    if tool is Tool.INITCHECK and filter_label == "on" and kept:
        notes.append("initcheck ran with a kernel filter: writes by unchecked kernels are invisible to it, so "
                     "uninitialized-read findings on memory they wrote are false positives; compare --filter off")
    if target_failed and rc == ERROR_EXITCODE:
        notes.append("the target failed; its own exit code is masked by --error-exitcode")
    order = [(tool_failed, SanVerdict.TOOL_FAILED), (res.timed_out, SanVerdict.TIMEOUT),
             (target_failed, SanVerdict.TARGET_FAILED), (bool(kept), SanVerdict.ERRORS)]
    v = next((verdict for cond, verdict in order if cond), SanVerdict.CLEAN)
    target_exit = rc if rc not in (ERROR_EXITCODE, None) else None
    return ToolRun(tool, workload, v, bool(kept), target_failed, incomplete, target_exit, rc, kept, suppressed,
                   text.reported_errors, res.seconds, filter_label, files, tuple(notes))


def run_tool(binary: str, opts: SanitizeOptions, target: list[str], out: Path, workload: str,
             rules: tuple[Rule, ...], timeout: float, filter_label: str) -> ToolRun:
    stem = opts.xml_path.with_suffix("")
    log, err = stem.with_suffix(".log"), stem.with_suffix(".stderr")
    res = proc.run(build_argv(binary, opts, target), timeout=timeout, stdout_path=log, stderr_path=err)
    xml = parse_xml(opts.xml_path, opts.tool.value) if opts.xml_path.is_file() else None
    text = parse_text(log, opts.tool.value)
    files = {"xml": opts.xml_path.name, "log": log.name, "stderr": err.name}
    return verdict(opts.tool, workload, res, xml, text, rules, filter_label, files)


def import_outputs(path: Path, tool: str | None, rules: tuple[Rule, ...]) -> ToolRun:
    """A verdict from outputs made elsewhere: FILE.xml (with FILE.log beside it when present) or FILE.log."""
    from tracer.sanitize.parse_text import detect_tool

    xml_path = path if path.suffix == ".xml" else path.with_suffix(".xml")
    log_path = path if path.suffix != ".xml" else path.with_suffix(".log")
    name = tool or _tool_from_name(path) or (detect_tool(log_path) if log_path.is_file() else None) or "memcheck"
    xml = parse_xml(xml_path, name) if xml_path.is_file() else None
    text = parse_text(log_path, name) if log_path.is_file() else Parsed((), 0, False)
    if xml is None and not log_path.is_file():
        raise UsageError(f"{path}: neither {xml_path.name} nor {log_path.name} exists")
    res = proc.ProcResult((), None, False, 0.0, log_path, log_path)  # the exit code is not known for imported output
    files = {k: str(p) for k, p in (("xml", xml_path), ("log", log_path)) if p.is_file()}
    run = verdict(Tool(name), path.stem, res, xml if xml is not None else Parsed((), 0, False), text, rules, "unknown", files)
    if not log_path.is_file():
        run = ToolRun(**{**run.__dict__, "notes": run.notes + ("no text log beside the XML: target failure and "
                                                                 "totals cannot be judged",)})
    return run


def _tool_from_name(path: Path) -> str | None:
    return next((t.value for t in Tool if t.value in path.name), None)
