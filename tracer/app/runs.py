"""Run directories on disk: found under a folder, opened through the reading layer
(tracer/artifact.py) and summarised from the verdict JSON the commands wrote, so a page never holds
a verdict of its own. Fail closed: a run whose verdict cannot be read is `error`, one that was never
judged (no verdict.json, hazards without memory sets) is `unknown`, never clean.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from tracer.artifact import CampaignRun, JobRun, NcuRun, SanitizeRun, TraceRun, open_artifact
from tracer.store.sqlite_open import SQLITE_MAGIC
from tracer.errors import TraceFormatError, TracerError, UsageError

MAX_DEPTH = 6  # folders below a root searched for runs
RUN_FILES = ("trace.sqlite", "report.json", "profile.json", "verdict.json", "command.json")
SIGNATURE_FILES = (*RUN_FILES, "environment.json", "tags.json", "procs")  # what a summary reads


class RunKind(str, Enum):
    TRACE = "trace"
    JOB = "job"  # several processes under procs/
    SANITIZE = "sanitize"
    PROFILE = "profile"
    CAMPAIGN = "campaign"


class Status(str, Enum):
    """One word per run, most serious first; `ok` only where the verdict proves it."""

    ERROR = "error"  # its files cannot be read
    FINDINGS = "findings"  # hazards, UNORDERED pairs, sanitizer errors, failed trials
    INCOMPLETE = "incomplete"  # a rank died, a sanitizer run that cannot prove it checked everything
    UNKNOWN = "unknown"  # nothing judged (no verdict.json, no memory sets, no trials yet)
    OK = "ok"


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    path: Path  # resolved
    kind: RunKind
    created: float  # unix seconds (the run's newest result file)
    command: str
    device: str
    status: Status
    counts: dict[str, Any] = field(default_factory=dict)  # what the status rests on (kind-specific)
    tags: tuple[str, ...] = ()
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "path": str(self.path), "created": self.created, "command": self.command,
                "device": self.device, "status": self.status.value, "counts": self.counts, "tags": list(self.tags),
                "error": self.error}


# ---- finding runs ------------------------------------------------------------------------------

def listing(path: Path) -> dict[str, os.stat_result]:
    """Size and times of a run folder's result files, from one scandir (a file run: itself)."""
    try:
        if path.is_file():  # a campaign store: a running campaign writes through its -wal file first
            wal = path.with_name(path.name + "-wal")
            return {path.name: path.stat(), **({wal.name: wal.stat()} if wal.is_file() else {})}
        with os.scandir(path) as it:
            return {e.name: e.stat() for e in it if e.name in SIGNATURE_FILES}
    except OSError:
        return {}


def looks_like_run(path: Path) -> bool:
    """Cheap, by names only: a folder holding a result file or procs/, or a campaign store file."""
    if path.is_dir():
        return _is_run_names({e.name for e in os.scandir(path)})
    return path.suffix == ".sqlite" and _is_sqlite(path)


def _is_run_names(names: set[str]) -> bool:
    return any(n in names for n in RUN_FILES) or "procs" in names


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def discover(roots: Sequence[Path]) -> Iterator[Path]:
    """Every run under the roots (resolved), not descending into a run; hidden names (temporary
    run directories) and symlinks leaving their root are skipped."""
    return (path for path, _ in discover_listed(roots))


def discover_listed(roots: Sequence[Path]) -> Iterator[tuple[Path, dict[str, os.stat_result]]]:
    """`discover` with each run's `listing`, from the one scandir per folder the walk makes."""
    for root in roots:
        real = root.resolve()
        yield from _walk(real, real, 0)


def _walk(root: Path, folder: Path, depth: int) -> Iterator[tuple[Path, dict[str, os.stat_result]]]:
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    if folder != root and _is_run_names({e.name for e in entries}):
        try:
            yield folder, {e.name: e.stat() for e in entries if e.name in SIGNATURE_FILES}
        except OSError:
            yield folder, {}
        return
    for e in entries:
        if e.name.startswith("."):
            continue
        path = Path(e.path)
        if e.is_symlink() and not path.resolve().is_relative_to(root):
            continue
        if e.is_dir():
            if depth < MAX_DEPTH:
                yield from _walk(root, path.resolve() if e.is_symlink() else path, depth + 1)
        elif e.name.endswith(".sqlite") and _is_campaign(path):
            real = path.resolve() if e.is_symlink() else path
            yield real, listing(real)


def _is_campaign(path: Path) -> bool:
    from tracer.campaign.schema import is_campaign_store

    return _is_sqlite(path) and is_campaign_store(path)


def inside(roots: Sequence[Path], candidate: Path) -> Path:
    """The candidate resolved (symlinks followed) when it lies under one of the roots; else a UsageError."""
    real = candidate.resolve()
    if not any(real == r.resolve() or real.is_relative_to(r.resolve()) for r in roots):
        raise UsageError(f"{candidate}: outside the run folders ({', '.join(str(r) for r in roots)})")
    return real


# ---- summaries ---------------------------------------------------------------------------------

def summarize(path: Path, files: dict[str, os.stat_result] | None = None) -> RunSummary:
    """What the run list shows of one run (`files`: its listing, when the caller has it); an
    unreadable run is a summary with status `error`."""
    files = listing(path) if files is None else files
    cmd = _side_json(path, "command.json", files)
    common: dict[str, Any] = {"path": path, "created": _mtime(path, files), "command": _command(cmd),
              "device": _device(path, files), "tags": _tags(path, cmd, files)}
    try:
        return _summary(path, _open(path, files), common)
    except (TracerError, KeyError, TypeError, ValueError, AttributeError) as exc:
        error = str(exc) if isinstance(exc, TracerError) else f"{type(exc).__name__}: {exc}"
        return RunSummary(kind=_guess_kind(path), status=Status.ERROR, error=error, **common)


def _open(path: Path, files: dict[str, os.stat_result]) -> Any:
    """open_artifact's reader for the run, except for a plain trace run directory (trace.sqlite, no
    procs/ or profile.json: what open_artifact opens as a TraceRun), whose summary needs only its
    verdict.json: neither the trace nor its side files are opened for the list."""
    if "trace.sqlite" in files and not {"procs", "profile.json"} & files.keys() and path.is_dir():
        return RunKind.TRACE
    return open_artifact(path)


def _summary(path: Path, art: Any, common: dict[str, Any]) -> RunSummary:
    if art is RunKind.TRACE or isinstance(art, TraceRun):
        status, counts = trace_status(_verdict_file(path))
        return RunSummary(kind=RunKind.TRACE, status=status, counts=counts, **common)
    if isinstance(art, JobRun):
        status, counts = job_status(_verdict_file(path))
        return RunSummary(kind=RunKind.JOB, status=status, counts=counts, **common)
    if isinstance(art, SanitizeRun):
        status, counts = sanitize_status([r.to_json() for r in art.runs])
        return RunSummary(kind=RunKind.SANITIZE, status=status, counts=counts, **common)
    if isinstance(art, NcuRun):
        launches = sum(len(t.report.launches) for t in art.run.targets)
        return RunSummary(kind=RunKind.PROFILE, status=Status.OK if launches else Status.UNKNOWN,
                          counts={"targets": len(art.run.targets), "launches": launches}, **common)
    if isinstance(art, CampaignRun):
        status, counts = campaign_status(art)
        return RunSummary(kind=RunKind.CAMPAIGN, status=status, counts=counts, **common)
    raise TraceFormatError(f"{path}: not a run tracer serves")


def _verdict_file(path: Path) -> dict[str, Any] | None:
    file = path / "verdict.json" if path.is_dir() else None
    if file is None or not file.is_file():
        return None
    return _read_json(file)


def trace_status(v: dict[str, Any] | None) -> tuple[Status, dict[str, Any]]:
    """From a verdict.json as `trace run`/`trace analyze` wrote it."""
    if v is None:
        return Status.UNKNOWN, {"note": "no verdict.json: not analysed"}
    hz = v.get("hazards") or {}
    hazards = sum(int(hz["counts"].get(k, 0)) for k in ("RAW", "WAR", "WAW", "reuse")) if hz.get("memory") else None
    counts = {"kernels": int(v["kernels"]), "unordered": int(v["pair_counts"].get("unordered", 0)),
              "hazards": hazards, "unjudged": int(hz.get("unjudged_kernels", 0)) if hz.get("memory") else None,
              "record_errors": len(v.get("record_errors") or {}), "pair_mode": _pair_mode(v.get("pair_spec"))}
    if counts["unordered"] or hazards:
        return Status.FINDINGS, counts
    if counts["record_errors"] or counts["unjudged"]:
        return Status.INCOMPLETE, counts
    if hazards is None and counts["pair_mode"] == "none":
        return Status.UNKNOWN, counts  # neither hazards nor pairs were judged
    return Status.OK, counts


def _pair_mode(spec: Any) -> str:
    if isinstance(spec, dict):
        return str(spec.get("mode", "none"))
    return "none" if spec in (None, "", "none") else "globs" if spec != "all" else "all"


def job_status(v: dict[str, Any] | None) -> tuple[Status, dict[str, Any]]:
    if v is None:
        return Status.UNKNOWN, {"note": "no verdict.json: not analysed"}
    per = [trace_status(a.get("verdict", a)) for a in v.get("analyses", [])]
    counts = {"kernels": int(v.get("kernels", 0)), "processes": len(v.get("job", {}).get("processes", [])),
              "incomplete": len(v.get("incomplete", [])),
              "unordered": sum(c.get("unordered", 0) for _, c in per),
              "hazards": None if any(c.get("hazards") is None for _, c in per) else sum(c["hazards"] for _, c in per)}
    statuses = [s for s, _ in per]
    if Status.FINDINGS in statuses:
        return Status.FINDINGS, counts
    if counts["incomplete"] or Status.INCOMPLETE in statuses:
        return Status.INCOMPLETE, counts
    return (Status.OK if statuses and all(s is Status.OK for s in statuses) else Status.UNKNOWN), counts


def sanitize_status(runs: list[dict[str, Any]]) -> tuple[Status, dict[str, Any]]:
    verdicts = [str(r["verdict"]) for r in runs]
    counts = {"runs": len(runs), "findings": sum(int(f["count"]) for r in runs for f in r["findings"]),
              "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))}}
    if any(v in ("errors", "target-failed", "tool-failed", "timeout") for v in verdicts):
        return Status.FINDINGS, counts
    if any(v != "clean" for v in verdicts):
        return Status.INCOMPLETE, counts
    return Status.OK, counts


def campaign_status(c: CampaignRun) -> tuple[Status, dict[str, Any]]:
    rates = {s.label: {"failures": s.failures, "trials": s.trials} for s in c.cells}
    counts = {"name": c.name, "cells": len(c.cells) + len(c.empty), "empty": len(c.empty), "rates": rates}
    if any(s.failures for s in c.cells):
        return Status.FINDINGS, counts
    return (Status.OK if c.cells and not c.empty else Status.UNKNOWN), counts


def headline(kind: str, counts: dict[str, Any]) -> str:
    """One line of what a run's status rests on, from its summary counts (the run list shows it)."""
    if kind in (RunKind.TRACE.value, RunKind.JOB.value):
        if counts.get("note"):
            return str(counts["note"])
        hazards = counts.get("hazards")
        parts = ["hazards unknown" if hazards is None else f"{hazards} hazard(s)", f"{counts.get('unordered') or 0} UNORDERED",
                 f"{counts.get('kernels', '?')} kernels",
                 f"{counts['incomplete']} process(es) incomplete" if counts.get("incomplete") else "",
                 f"{counts['record_errors']} lost record type(s)" if counts.get("record_errors") else ""]
        return ", ".join(p for p in parts if p)
    if kind == RunKind.SANITIZE.value:
        verdicts = ", ".join(f"{k} {v}" for k, v in (counts.get("verdicts") or {}).items())
        return f"{counts.get('findings') or 0} finding(s) in {counts.get('runs') or 0} run(s): {verdicts}"
    if kind == RunKind.CAMPAIGN.value:
        rates = ", ".join(f"{k} {v['failures']}/{v['trials']}" for k, v in (counts.get("rates") or {}).items())
        return rates + (f"; {counts['empty']} cell(s) without trials" if counts.get("empty") else "")
    if kind == RunKind.PROFILE.value:
        return f"{counts.get('launches') or 0} launch(es) in {counts.get('targets') or 0} target(s)"
    return ""


def _guess_kind(path: Path) -> RunKind:
    if path.is_file():
        return RunKind.CAMPAIGN
    if (path / "procs").is_dir():
        return RunKind.JOB
    if (path / "report.json").is_file():
        return RunKind.SANITIZE
    if (path / "profile.json").is_file():
        return RunKind.PROFILE
    return RunKind.TRACE


def _read_json(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"{file}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise TraceFormatError(f"{file}: a JSON {type(data).__name__}, not an object")
    return data


def _mtime(path: Path, files: dict[str, os.stat_result]) -> float:
    times = [st.st_mtime for name, st in files.items() if name in RUN_FILES or path.is_file()]
    if times:
        return max(times)
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _side_json(path: Path, name: str, files: dict[str, os.stat_result]) -> dict[str, Any]:
    if name not in files or path.is_file():
        return {}
    try:
        return _read_json(path / name)
    except TraceFormatError:
        return {}


def _command(cmd: dict[str, Any]) -> str:
    if "argv" in cmd and isinstance(cmd["argv"], list):
        return " ".join(str(a) for a in cmd["argv"])
    if "imported_from" in cmd:
        return f"import {cmd['imported_from']}"
    return ""


def _device(path: Path, files: dict[str, os.stat_result]) -> str:
    gpu = _side_json(path, "environment.json", files).get("gpu")
    return str(gpu.get("name", "")) if isinstance(gpu, dict) else str(gpu or "")


def _tags(path: Path, cmd: dict[str, Any], files: dict[str, os.stat_result]) -> tuple[str, ...]:
    tags = [t for t in (cmd.get("backend"), "memory" if cmd.get("memory") else None) if isinstance(t, str)]
    if "imported_from" in cmd:
        tags.append("imported")
    extra = _side_json(path, "tags.json", files).get("tags", [])
    return tuple(tags + [str(t) for t in extra if isinstance(t, str)])


# ---- a run's verdict JSON, as the CLI writes it --------------------------------------------------

def verdict_json(path: Path) -> dict[str, Any]:
    """The JSON the CLI wrote (or prints) for this run: verdict.json of a trace or job run,
    report.json of a sanitize run, profile.json, or `campaign report --json` of a store."""
    art = open_artifact(path)
    if isinstance(art, (TraceRun, JobRun)):
        v = _verdict_file(path)
        if v is None:
            raise TraceFormatError(f"{path}: no verdict.json (the run was not analysed: `tracer trace analyze` it)")
        return v
    if isinstance(art, SanitizeRun):
        return _read_json(path / "report.json" if path.is_dir() else path)
    if isinstance(art, NcuRun):
        return art.run.to_json()
    if isinstance(art, CampaignRun) and art.store:
        from tracer.campaign.report import report_data
        from tracer.campaign.trials_db import Store

        store = Store.open(path, readonly=True)
        try:
            data: dict[str, Any] = json.loads(json.dumps(report_data(store, None), default=str))
            return data
        finally:
            store.close()
    raise TraceFormatError(f"{path}: no verdict JSON for this kind of run")


def artifacts(path: Path) -> list[tuple[str, int]]:
    """Every file of a run (relative name, bytes), for downloads."""
    if path.is_file():
        return [(path.name, path.stat().st_size)]
    out = []
    for p in sorted(path.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out.append((str(p.relative_to(path)), p.stat().st_size))
    return out


def write_perfetto_json(path: Path, out: Path) -> int:
    """The Perfetto JSON of a trace or job run, as `tracer trace export --perfetto` writes it (the
    pairs its verdict.json names, else none)."""
    from tracer.views.plots.perfetto import write_perfetto
    from tracer.analysis.pairs import PairMode, PairSpec

    art = open_artifact(path)
    if not isinstance(art, (TraceRun, JobRun)):
        raise TraceFormatError(f"{path}: not a trace or job run: no Perfetto JSON")
    spec = PairSpec.from_args(None, default=art.pair_spec)
    out.parent.mkdir(parents=True, exist_ok=True)  # the service's cache folder (a user's -o must exist)
    return write_perfetto(art.analyze(PairSpec(PairMode.NONE) if spec.implicit else spec, hazards=False), out)
