"""Read a job: a run directory whose processes each left a marker (and, when traced, a trace) under
`procs/` (docs/design/capture-memory-jobs.md, "Jobs"). Reading only: no process is asked whether it
still runs, no capture code is imported.

Each marker `procs/<host>-<pid>[-r<RANK>].json` says who the process was (pid, host, rank, local
rank), how it ended (rewritten at exit, or by `trace run` for a process that died) and two clock
pairs `(cupti_ns, unix_ns)` read back to back at start and end; its trace is `<stem>.sqlite` beside
it, or the run's `trace.sqlite` when `process.json` names it (one busy process stands for the run).
Every outcome is explicit: a process that died without a trace is listed as such, never skipped.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from statistics import median
from typing import Any

from tracer.errors import TraceFormatError
from tracer.store.inputs import check_file, load_json_object
from tracer.model.trace import Trace
from tracer.format.marker import Marker, State
from tracer.format.procs import PARTIAL_META, PROCS, STEM, Outcome, marker_files, partial_path

__all__ = ["PARTIAL_META", "PROCS", "Ending", "Job", "JobProcess", "Outcome", "is_job_dir", "load_job", "read_processes"]
SIGTERM = 15


class Ending(str, Enum):
    EXITED = "exited"
    SIGNALLED = "signalled"  # stopped by a signal it handled (SIGTERM): its trace was written
    DIED = "died"  # killed without exiting (SIGKILL, a crash): `trace run` rewrote its marker
    UNFINISHED = "unfinished"  # its start marker was never rewritten
    DETACHED = "detached"  # traced until `trace run --stop-after`, then left running


@dataclass(frozen=True)
class ClockPairs:
    """(cupti_ns, unix_ns) read back to back: offset = unix - cupti puts the trace on wall time."""

    pairs: tuple[tuple[int, int], ...]

    @property
    def offset_ns(self) -> int | None:
        return round(median(u - c for c, u in self.pairs)) if self.pairs else None

    @property
    def spread_ns(self) -> int | None:
        """How far the process's own pairs disagree (drift and read delay); None with one pair."""
        if len(self.pairs) < 2:
            return None
        offsets = [u - c for c, u in self.pairs]
        return max(offsets) - min(offsets)


@dataclass(frozen=True, kw_only=True)
class JobProcess:
    file: str  # the marker's stem: <host>-<pid>[-r<RANK>]
    label: str  # "rank R", or "pid P" without a rank; unique within the job
    pid: int
    ppid: int | None
    host: str
    rank: int | None
    local_rank: int | None
    world_size: int | None
    ending: Ending
    exit: int | None  # the code the process exited with, when known
    signal: int | None
    exception: str | None
    outcome: Outcome
    kernels: int | None  # as the marker says (the trace has the truth)
    trace_path: Path | None
    note: str  # why there is no trace, or what a partial trace holds ("" when complete)
    clock: ClockPairs
    fork_child: bool = False

    @property
    def traced(self) -> bool:
        return self.trace_path is not None

    @property
    def how(self) -> str:
        """How it ended, in words."""
        if self.ending is Ending.SIGNALLED:
            return f"stopped by signal {self.signal}" + (" (SIGTERM)" if self.signal == SIGTERM else "")
        if self.ending is Ending.DIED:
            return f"died of signal {self.signal}" if self.signal else "died without exiting (SIGKILL or a crash)"
        if self.ending is Ending.DETACHED:
            return "traced until --stop-after, left running"
        if self.ending is Ending.UNFINISHED:
            return "never finished (marker not rewritten: killed, crashed or still running)"
        code = "" if self.exit is None else f" {self.exit}"
        why = self.exception.strip().splitlines()[0].rstrip(": ")[:80] if self.exception and self.exception.strip() else ""
        return f"exited{code}" + (f" ({why})" if why else "")

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "file": self.file, "pid": self.pid, "ppid": self.ppid, "host": self.host,
                "rank": self.rank, "local_rank": self.local_rank, "world_size": self.world_size,
                "ending": self.ending.value, "exit": self.exit, "signal": self.signal, "exception": self.exception,
                "how": self.how, "outcome": self.outcome.value, "kernels": self.kernels,
                "trace": self.trace_path.name if self.trace_path else None, "note": self.note,
                "clock_pairs": [list(p) for p in self.clock.pairs], "clock_offset_ns": self.clock.offset_ns,
                "fork_child": self.fork_child}


@dataclass(frozen=True)
class Job:
    run_dir: Path
    processes: tuple[JobProcess, ...]
    traces: tuple[Trace | None, ...]  # per process, None where it left no trace
    untraced: tuple[dict[str, Any], ...]  # descendants that never wrote a marker (command.json)

    def traced(self) -> list[tuple[JobProcess, Trace]]:
        return [(p, t) for p, t in zip(self.processes, self.traces) if t is not None]

    def moved_to(self, run_dir: Path) -> Job:
        """The same job, its directory renamed (`trace run` reads it under its temporary name)."""
        def moved(path: Path | None) -> Path | None:
            return run_dir / path.relative_to(self.run_dir) if path is not None and path.is_relative_to(self.run_dir) else path

        procs = tuple(replace(p, trace_path=moved(p.trace_path)) for p in self.processes)
        traces = tuple(replace(t, source=str(moved(Path(t.source)))) if t is not None else None for t in self.traces)
        return replace(self, run_dir=run_dir, processes=procs, traces=traces)


# ---- markers ------------------------------------------------------------------------------------

def marker_paths(run_dir: Path) -> list[Path]:
    return marker_files(run_dir / PROCS)


def is_job_dir(path: Path) -> bool:
    """A run directory read as a job: markers under procs/, and either no trace.sqlite (several
    processes recorded kernels) or markers of several ranks (one busy rank's trace became
    trace.sqlite, the others died or recorded nothing: still a job, so they are not forgotten)."""
    markers = marker_paths(path)
    if not markers:
        return False
    if not (path / "trace.sqlite").is_file():
        return True
    ranks = {m.group("rank") for m in (STEM.match(p.stem) for p in markers) if m and m.group("rank") is not None}
    return len(ranks) >= 2


def _load_json(path: Path, what: str) -> dict[str, Any]:
    """command.json: at most RUN_FILE_LIMIT bytes and JSON_DEPTH_LIMIT levels, a regular file."""
    return load_json_object(path, what)


def _ending(m: Marker) -> tuple[Ending, int | None, int | None]:
    """(ending, exit code, signal) from the marker's state, `ended` and `exit`."""
    if m.state is State.EXITED and m.ended == "sigterm":
        return Ending.SIGNALLED, m.exit, SIGTERM
    if m.state is State.EXITED:
        return Ending.EXITED, m.exit, None
    if m.state is State.DIED:
        return Ending.DIED, None, m.fatal_signal
    if m.state is State.RUNNING:
        return Ending.UNFINISHED, None, None
    if m.state is State.DETACHED:
        return Ending.DETACHED, None, None
    raise TraceFormatError(f"{m.file}.json: state {m.state.value!r} is not one of exited, died, running, detached (its "
                           f"capture never started: {m.error or 'no reason given'})")


def _trace_of(run_dir: Path, stem: str, chosen: str | None) -> Path | None:
    """The process's trace; one that is there but is not a regular file (a FIFO, a socket, a
    device, a folder, a broken or looping symlink) is an error naming it, never 'no trace'."""
    for path in (run_dir / PROCS / f"{stem}.sqlite", *([run_dir / "trace.sqlite"] if chosen == stem else [])):
        if os.path.lexists(path):
            check_file(path, "a process trace")
            return path
    return None


def _outcome(m: Marker, ending: Ending, trace: Path | None, run_dir: Path) -> tuple[Outcome, str]:
    if trace is not None:
        partial = m.partial or (ending is Ending.DIED and "the process died: records up to its last flush")
        return (Outcome.PARTIAL, str(partial)) if partial else (Outcome.COMPLETE, "")
    exited = ending in (Ending.EXITED, Ending.SIGNALLED)
    if exited and m.trace is None:  # it finished and wrote no trace
        if m.cuda:
            return Outcome.NO_TRACE, m.untraced_cuda or "it used CUDA, but CUPTI never started in it"
        return Outcome.NO_CUDA, "it never used CUDA: nothing to trace"
    left = partial_path(run_dir / PROCS / f"{m.file}.sqlite")
    if left.is_file():
        return Outcome.NO_TRACE, f"an unfinished {left.name} was left (not completed by `trace run`): not read"
    named = m.trace
    if isinstance(named, str) and exited:
        return Outcome.NO_TRACE, f"its trace {named} is missing from {PROCS}/"
    return Outcome.NO_TRACE, "it left no trace file"


def read_marker(path: Path, run_dir: Path, chosen: str | None) -> JobProcess:
    m = Marker.load(path)
    stem = path.stem
    ending, code, sig = _ending(m)
    trace = _trace_of(run_dir, stem, chosen)
    outcome, note = _outcome(m.with_(file=stem), ending, trace, run_dir)
    clock = ClockPairs(tuple(pair for pair in (m.clock_start, m.clock_end) if pair is not None))
    return JobProcess(file=stem, label="", pid=m.pid, ppid=m.ppid, host=m.host, rank=m.rank, local_rank=m.local_rank,
                      world_size=m.world_size, ending=ending, exit=code, signal=sig, exception=m.exception, outcome=outcome,
                      kernels=m.kernels, trace_path=trace, note=note, clock=clock, fork_child=m.fork_child)


def _labels(procs: list[JobProcess]) -> list[JobProcess]:
    """'rank R' where one process has that rank, else 'rank R pid P'; 'pid P' without a rank
    (with the host when the job spans several)."""
    hosts = len({p.host for p in procs}) > 1
    ranks = [p.rank for p in procs]
    out = []
    for p in procs:
        if p.rank is None:
            label = f"pid {p.pid}" + (f"@{p.host}" if hosts else "")
        else:
            label = f"rank {p.rank}" if ranks.count(p.rank) == 1 else f"rank {p.rank} pid {p.pid}"
        out.append(replace(p, label=label))
    return out


def read_processes(run_dir: Path) -> tuple[JobProcess, ...]:
    """Every process of the job from its marker (traces not read), ranks first."""
    markers = marker_paths(run_dir)
    if not markers:
        raise TraceFormatError(f"{run_dir}: no process markers under {PROCS}/ (not a job run directory)")
    chosen_file = run_dir / "process.json"
    chosen = Marker.load(chosen_file).file if os.path.lexists(chosen_file) else None
    procs = [read_marker(p, run_dir, chosen) for p in markers]
    procs.sort(key=lambda p: (p.rank is None, p.rank if p.rank is not None else 0, p.host, p.pid))
    return tuple(_labels(procs))


def read_untraced(run_dir: Path) -> tuple[dict[str, Any], ...]:
    path = run_dir / "command.json"
    if not os.path.lexists(path):
        return ()
    untraced = _load_json(path, "command.json").get("untraced") or []
    return tuple(u for u in untraced if isinstance(u, dict))


def load_job(run_dir: Path, processes: tuple[JobProcess, ...] | None = None) -> Job:
    """The job with every trace read (the existing reader); a trace whose metadata says it is
    partial makes its process's outcome partial whatever its marker said."""
    from tracer.readers.load import load_trace

    procs = list(processes if processes is not None else read_processes(run_dir))
    traces: list[Trace | None] = []
    for i, p in enumerate(procs):
        trace = load_trace(p.trace_path) if p.trace_path is not None else None
        if trace is not None and trace.meta.get(PARTIAL_META) and p.outcome is not Outcome.PARTIAL:
            procs[i] = replace(p, outcome=Outcome.PARTIAL, note=trace.meta[PARTIAL_META])
        traces.append(trace)
    return Job(run_dir, tuple(procs), tuple(traces), read_untraced(run_dir))
