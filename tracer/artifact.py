"""The reading layer: what a path holds, opened as typed data.

`open_artifact(path)` recognises a trace run directory, a trace file (nsys/tracer SQLite, PyTorch
profiler JSON, plain or gzipped), a `tracer sanitize` output (its directory or report.json), a
campaign store (opened read-only), an ablation JSON or a `tracer profile` run directory (or its
profile.json), and returns a `TraceRun`, `SanitizeRun`, `CampaignRun`, `NcuRun` or `JobRun` (a run
directory whose processes left their markers and traces under procs/: a multi-process job). Formats
are sniffed from a bounded head, so a multi-GB trace is never read to find out what it is. Nothing
here runs a process or imports capture code: an .nsys-rep is exported to SQLite by the command
before it is opened.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracer import jsonkeys
from tracer.campaign.schema import is_campaign_store
from tracer.store.sqlite_open import SQLITE_MAGIC
from tracer.errors import TraceFormatError
from tracer.store.inputs import check_file, load_json_object, read_head
from tracer.analysis.pairs import PairSpec

if TYPE_CHECKING:
    from tracer.campaign.stats import CellStats
    from tracer.ncu.profile_json import ProfileRun
    from tracer.sanitize.model import ToolRun
    from tracer.analysis.analyze import Analysis
    from tracer.readers.job import Job, JobProcess
    from tracer.analysis.job_summary import JobAnalysis
    from tracer.model.trace import Trace

HEAD_BYTES = 1 << 16
NSYS_REP = ".nsys-rep"


class Kind(str, Enum):
    TRACE = "trace"
    SANITIZE = "sanitize"
    CAMPAIGN = "campaign"


@dataclass(frozen=True, kw_only=True)
class TraceRun:
    path: Path  # as given
    trace_file: Path  # what the reader opens
    run_dir: Path | None  # the run directory, when path is one
    pair_spec: PairSpec | None  # the pairs its verdict.json was made with, when there is one
    environment: dict[str, Any] | None  # environment.json of a run directory

    def load(self) -> Trace:
        from tracer.readers.load import load_trace

        return load_trace(self.trace_file)

    def analyze(self, pairs: PairSpec, hazards: bool = True) -> Analysis:
        from tracer.analysis.analyze import analyze

        return analyze(self.load(), pairs, hazards=hazards)


@dataclass(frozen=True, kw_only=True)
class JobRun:
    """A run directory of several processes: their markers read (cheap), their traces when loaded."""

    path: Path
    run_dir: Path
    processes: tuple[JobProcess, ...]
    pair_spec: PairSpec | None  # the pairs its verdict.json was made with, when there is one
    environment: dict[str, Any] | None

    def load(self) -> Job:
        from tracer.readers.job import load_job

        return load_job(self.run_dir, self.processes)

    def analyze(self, pairs: PairSpec, hazards: bool = True) -> JobAnalysis:
        from tracer.analysis.job_summary import analyze_job

        return analyze_job(self.load(), pairs, hazards)


@dataclass(frozen=True)
class SanitizeRun:
    path: Path
    runs: tuple[ToolRun, ...]


@dataclass(frozen=True, kw_only=True)
class CampaignRun:
    path: Path
    name: str
    cells: tuple[CellStats, ...]  # cells with at least one trial
    empty: tuple[str, ...]  # labels of cells with no trials yet (no interval to show)
    store: bool  # a campaign store; False: an ablation JSON


@dataclass(frozen=True)
class NcuRun:
    path: Path
    run: ProfileRun  # its profile.json: every launch's records


Artifact = TraceRun | SanitizeRun | CampaignRun | NcuRun | JobRun


def _head(path: Path) -> bytes:
    return read_head(path, HEAD_BYTES, "a trace, sanitizer output or campaign file")


def _json_keys(head: bytes) -> set[str]:
    """Top-level keys of a JSON file that fits in the head; for a bigger one, the keys named in it."""
    if len(head) < HEAD_BYTES:
        try:
            data = jsonkeys.loads(head)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return set()
        return set(data) if isinstance(data, dict) else set()
    text = head.decode("utf-8", "replace")
    return {k for k in ("traceEvents", "runs", "variants") if f'"{k}"' in text}


def sniff(path: Path) -> Kind:
    """The kind of a file from its first bytes; anything unrecognised is left to the trace readers,
    whose errors name the format they expected."""
    if path.name.lower().endswith(NSYS_REP):
        raise TraceFormatError(f"{path}: an .nsys-rep must be exported to SQLite before it is read "
                               "(`tracer trace import` does it where nsys is installed)")
    head = _head(path)
    if head.startswith(SQLITE_MAGIC):
        return Kind.CAMPAIGN if is_campaign_store(path) else Kind.TRACE
    if head.lstrip()[:1] == b"{":
        keys = _json_keys(head)
        if "traceEvents" not in keys and "runs" in keys:
            return Kind.SANITIZE
        if "traceEvents" not in keys and "variants" in keys:
            return Kind.CAMPAIGN
    return Kind.TRACE


def _read_json(path: Path) -> dict[str, Any]:
    return load_json_object(path, path.name)


def _run_files(path: Path) -> tuple[PairSpec | None, dict[str, Any] | None]:
    """The pairs of a run directory's verdict.json and its environment.json (None where absent)."""
    verdict, env = path / "verdict.json", path / "environment.json"
    spec = PairSpec.from_json(_read_json(verdict).get("pair_spec", "none")) if os.path.lexists(verdict) else None
    return spec, _read_json(env) if os.path.lexists(env) else None


def open_trace_dir(path: Path) -> TraceRun:
    spec, env = _run_files(path)
    return TraceRun(path=path, trace_file=path / "trace.sqlite", run_dir=path, pair_spec=spec, environment=env)


def open_job_dir(path: Path) -> JobRun:
    from tracer.readers.job import read_processes

    spec, env = _run_files(path)
    return JobRun(path=path, run_dir=path, processes=read_processes(path), pair_spec=spec, environment=env)


def open_sanitize(path: Path) -> SanitizeRun:
    from tracer.sanitize.model import ToolRun

    report = path / "report.json" if path.is_dir() else path
    data = _read_json(report)
    try:
        runs = tuple(ToolRun.from_json(r) for r in data["runs"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceFormatError(f"{report}: not a tracer sanitize report ({type(exc).__name__}: {exc})") from exc
    if not runs:
        raise TraceFormatError(f"{report}: a sanitize report with no runs")
    return SanitizeRun(path, runs)


def open_campaign(path: Path) -> CampaignRun:
    from tracer.campaign.stats import cell_stats
    from tracer.campaign.trials_db import Store

    if is_campaign_store(path):
        store = Store.open(path, readonly=True)
        try:
            summary = store.summary()
            name = store.meta("name") or path.stem
        finally:
            store.close()
        return CampaignRun(path=path, name=name, cells=tuple(c.stats for c in summary if c.stats is not None),
                           empty=tuple(c.label for c in summary if c.stats is None), store=True)
    data = _read_json(path)
    try:
        variants = {str(k): (int(v["failures"]), int(v["trials"])) for k, v in data["variants"].items()}
        if not variants or any(not 0 <= f <= n for f, n in variants.values()):
            raise ValueError("no variants, or failures outside 0..trials")
        cells = tuple(cell_stats(k, f, n) for k, (f, n) in variants.items() if n > 0)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TraceFormatError(f"{path}: not a campaign store or a JSON of variant -> trials/failures "
                               f"({type(exc).__name__}: {exc})") from exc
    return CampaignRun(path=path, name=str(data.get("name") or path.stem), cells=cells, empty=tuple(k for k, (_, n) in variants.items() if n == 0),
                       store=False)


def open_profile(path: Path) -> NcuRun:
    from tracer.ncu.profile_json import load_run

    return NcuRun(path, load_run(path))


def _profile_run(path: Path) -> bool:
    """A `tracer profile` run (a directory, or its .json): the ncu layer is imported only where one can be."""
    if not (path.is_dir() or path.suffix.lower() == ".json"):
        return False
    from tracer.ncu.profile_json import is_profile_run

    return is_profile_run(path)


RUN_DIR_NAMES = ("trace.sqlite", "report.json", "profile.json")


def _name_special_entries(folder: Path) -> None:
    """A folder read as no run directory because its trace (trace.sqlite, report.json, profile.json,
    a Kineto *.json) is a FIFO, socket, device, folder or broken symlink: that entry is named."""
    for entry in sorted(folder.iterdir()):
        if entry.name in RUN_DIR_NAMES or entry.name.lower().endswith((".json", ".json.gz")):
            check_file(entry, "a trace or run file")


def open_artifact(path: Path) -> Artifact:
    if _profile_run(path):
        return open_profile(path)
    if path.is_dir():
        from tracer.readers.job import is_job_dir

        if is_job_dir(path):
            return open_job_dir(path)
        if (path / "trace.sqlite").is_file():
            return open_trace_dir(path)
        if (path / "report.json").is_file():
            return open_sanitize(path)
        from tracer.readers.kineto_job import is_kineto_dir, kineto_processes

        if is_kineto_dir(path):
            return JobRun(path=path, run_dir=path, processes=kineto_processes(path), pair_spec=None, environment=None)
        _name_special_entries(path)
        raise TraceFormatError(f"{path}: not a run directory (no trace.sqlite, procs/, report.json, profile.json or "
                               "PyTorch profiler traces in it)")
    if not os.path.lexists(path):
        raise TraceFormatError(f"{path}: no such file or directory")
    check_file(path, "a trace, sanitizer output, campaign store or run directory")
    kind = sniff(path)
    if kind is Kind.SANITIZE:
        return open_sanitize(path)
    if kind is Kind.CAMPAIGN:
        return open_campaign(path)
    return TraceRun(path=path, trace_file=path, run_dir=None, pair_spec=None, environment=None)


def expect(path: Path, artifact: Artifact, wanted: type, what: str) -> Any:
    """The artifact when it is of the wanted kind, else a one-line error naming what it is."""
    if not isinstance(artifact, wanted):
        names = {TraceRun: "a trace", SanitizeRun: "a sanitizer report", CampaignRun: "a campaign store or ablation JSON",
                 NcuRun: "an Nsight Compute profile run", JobRun: "a multi-process job (procs/)"}
        raise TraceFormatError(f"{path} holds {names.get(type(artifact), type(artifact).__name__)}, not {what}")
    return artifact
