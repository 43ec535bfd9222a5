"""`trace run`: capture a command into a run directory (trace.sqlite, command.json,
environment.json, logs/; with CUPTI also procs/: one marker and trace per traced process),
analyse it and write verdict.json; the directory is written under a temporary name and renamed
when complete. A run that reads as a job (several processes with kernels, or markers of several
ranks) is analysed as `trace analyze` reads a job: every process on its own, then collectives,
stragglers and clocks. A run where no process recorded a kernel is never analysed (an empty trace
proves nothing): it fails, and its files are kept as DIR.failed.

A run stopped early is a result: at --timeout or Ctrl-C the command's group is stopped (SIGTERM:
every traced process writes its trace), the traces are analysed as a partial run and the run
directory is written, then the caller exits 8 (TimedOut). verdict.json says how the run stopped
(`stopped`), where each process's streams stood (`ending`: tracer/analysis/ending.py) and which
processes were not traced (`untraced`, with whether each held a GPU)."""
from __future__ import annotations

import threading
import time
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracer.artifact import TraceRun
from tracer.capture.options import MEMORY_DEFAULT
from tracer.errors import TargetFailed, TimedOut, UsageError, unknown
from tracer.format.marker import Marker, State
from tracer.proc import ProcResult, check_timeout, raise_if_timed_out
from tracer.store.atomic import copy_file
from tracer.schemas import with_header
from tracer.store.rundir import environment, staged, write_json
from tracer.analysis.pairs import PairSpec

if TYPE_CHECKING:
    from tracer.capture.launcher import CaptureResult
    from tracer.analysis.analyze import Analysis
    from tracer.analysis.ending import ProcessEnd
    from tracer.analysis.job_summary import JobAnalysis

    Verdicts = Analysis | JobAnalysis

BACKENDS = ("auto", "nsys", "cupti")


@dataclass(frozen=True, kw_only=True)
class CaptureRequest:
    name: str
    command: tuple[str, ...]
    backend: str  # nsys or cupti (see choose_backend)
    output: Path
    timeout: float
    cuda_event_trace: bool = False
    capture_range: str | None = None
    memory: bool = False  # cupti: record memory access sets (the TRACER_* tables)
    stop_after: float | None = None  # cupti: finish the traces after this many seconds, leave the command running
    memory_steps: str = ""  # the memory capture window (tracer/capture/window.py): NVTX steps A:B
    memory_range: str = ""  # ... or NVTX ranges matching this glob

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", check_timeout(self.timeout))
        if self.memory and self.backend != "cupti":
            raise UsageError(f"--memory needs the cupti backend, not {self.backend!r}")
        check_window(self.memory_steps, self.memory_range, self.memory)
        if self.stop_after is not None:
            object.__setattr__(self, "stop_after", check_stop_after(self.stop_after, self.timeout, self.backend))


def check_window(steps: str, glob: str, memory: bool) -> None:
    """--memory-steps A:B or --memory-range GLOB (one of them), with memory sets recorded."""
    from tracer.capture.window import parse_steps

    if steps and glob:
        raise UsageError(f"--memory-steps {steps!r} and --memory-range {glob!r}: give one capture window, not both")
    if (steps or glob) and not memory:
        raise UsageError(f"{'--memory-steps' if steps else '--memory-range'} needs --memory (it was turned off)")
    if steps:
        try:
            parse_steps(steps)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def check_stop_after(value: object, timeout: float, backend: str) -> float:
    """--stop-after: seconds above 0 and below --timeout, with the cupti backend."""
    try:
        seconds = float(value)  # type: ignore[arg-type]  # any object: what float() refuses is the error below
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not (math.isfinite(seconds) and 0 < seconds < timeout):
        raise UsageError(f"--stop-after {value!r} must be a number of seconds above 0 and below --timeout ({timeout:g})")
    if backend != "cupti":
        raise UsageError(f"--stop-after needs the cupti backend, not {backend!r}")
    return seconds


@dataclass(frozen=True, kw_only=True)
class Recorded:
    run_dir: Path
    target_exit: int | None  # None: imported (no target ran)
    analysis: Verdicts  # a JobAnalysis when the run directory reads as a job (procs/ of several ranks)
    captured: CaptureResult | None = None  # CUPTI: every process and how it ended
    endings: tuple[ProcessEnd, ...] = field(default=())  # where each traced process's streams stood at its end
    proc: ProcResult | None = None  # how the command ran (None: imported)

    @property
    def stopped(self) -> str:
        """How tracer ended the run early ("timeout", "interrupt", "stop-after"), "" when it did not."""
        return self.proc.stopped if self.proc is not None else ""

    @property
    def untraced(self) -> tuple[dict[str, Any], ...]:
        return self.captured.untraced if self.captured is not None else ()

    def failures(self, fail_on_unordered: bool, fail_on_hazard: bool) -> list[str]:
        """The analysis's failures, and, for any check asked for, every untraced process that held
        a GPU or of which that is not known: its GPU work is missing from the verdicts."""
        out = self.analysis.failures(fail_on_unordered, fail_on_hazard)
        if (fail_on_unordered or fail_on_hazard) and self.captured is not None:
            out += [f"untraced process {u['pid']} ({u.get('comm', '?')}) {_gpu_words(u)}: its GPU work is not judged"
                    for u in self.captured.untraced_gpu]
        return out

    @property
    def job(self) -> bool:
        from tracer.analysis.analyze import Analysis

        return not isinstance(self.analysis, Analysis)

    @property
    def target_failure(self) -> str:
        """Why the traced command counts as failed ("" when it exited 0 or nothing ran): it failed, or
        a process that recorded kernels died before finishing its trace."""
        why = self.captured.failure() if self.captured is not None else _exit_failure(self.target_exit)
        if not why:
            return ""
        kept = "its traces were written and analysed all the same" if self.job else "its trace was written and analysed all the same"
        return f"{why}; {kept}: {self.run_dir} (logs in {self.run_dir / 'logs'})"

    def notices(self, listed: bool = False) -> list[str]:
        """Lines for stderr before the verdicts: the processes and how each ended (when there was
        more than one, or one did not end well; not when `listed`: a job's text verdicts list them),
        a partial trace, a job, the untraced processes; where each process stood when the run was
        stopped or a process died."""
        if self.captured is None:
            return []
        lines = process_notices(self.captured, self.run_dir, self.job, listed)
        if self.stopped or any(e.unflushed_s is not None or "died" in e.how for e in self.endings):
            lines.append(f"{_stop_words(self.captured.proc)}where each traced process stood:")
            lines += [line for e in self.endings for line in e.lines()]
        return lines + untraced_notices(self.captured)


def _gpu_words(u: dict[str, Any]) -> str:
    return "held a GPU" if u.get("gpu") == "yes" else "may have used a GPU (not known)"


def _stop_words(res: ProcResult) -> str:
    return {"timeout": f"stopped at --timeout after {res.seconds:.1f} s; ",
            "interrupt": f"stopped at Ctrl-C after {res.seconds:.1f} s; ",
            "stop-after": f"traces finished at --stop-after {res.seconds:.1f} s, the command left running; "}.get(res.stopped, "")


def untraced_notices(captured: CaptureResult) -> list[str]:
    from tracer.capture.launcher import untraced_line

    if not captured.untraced:
        return []
    return [f"untraced processes ({len(captured.untraced)}; python -I, non-Python programs: tracer cannot trace them):",
            *(untraced_line(u) for u in captured.untraced)]


def _exit_failure(code: int | None) -> str:
    if code in (0, None):
        return ""
    return f"the traced command {f'was killed by signal {-code}' if code < 0 else f'exited {code}'}"


def choose_backend(name: str) -> str:
    """auto: nsys when it can write reports, else CUPTI."""
    if name not in BACKENDS:
        raise unknown("backend", name, BACKENDS)
    if name != "auto":
        return name
    from tracer.capture.nsys import importer_status

    return "nsys" if importer_status()[0] else "cupti"


def capture_mode(backend: str, memory: bool | None, stop_after: float | None = None, window: str = "") -> tuple[str, bool]:
    """(backend, memory) of `trace run --backend B [--memory|--no-memory] [--stop-after N]`: memory
    access sets and detaching after N seconds need CUPTI, so `auto` picks it for them; --memory with
    nsys is a usage error (CaptureRequest). `window`: the text of --memory-steps and --memory-range
    ("" for neither); a capture window implies --memory unless --no-memory was given (then
    CaptureRequest refuses it)."""
    if memory is None and window:
        memory = True
    wanted = MEMORY_DEFAULT if memory is None else memory
    if backend == "auto" and (wanted or stop_after is not None):
        return "cupti", wanted
    chosen = choose_backend(backend)
    return chosen, bool(memory) if chosen != "cupti" else wanted


def _capture(req: CaptureRequest, run_dir: Path, logs: Path) -> tuple[ProcResult, CaptureResult | None]:
    """nsys writes run_dir/trace.sqlite; CUPTI traces every Python process of the command into
    run_dir/procs/, and the one that recorded kernels becomes run_dir/trace.sqlite."""
    if req.backend == "nsys":
        from tracer.capture.nsys import capture

        return capture(list(req.command), run_dir / "trace.sqlite", logs, req.timeout,
                       cuda_event_trace=req.cuda_event_trace, capture_range=req.capture_range), None
    from tracer.capture.launcher import capture_run

    captured = capture_run(list(req.command), run_dir, logs, req.timeout, memory=req.memory, describe=True,
                           stop_after=req.stop_after, window=(req.memory_steps, req.memory_range))
    return captured.proc, captured


def record(req: CaptureRequest, pairs: PairSpec, hazards: bool = True) -> Recorded:
    """Capture, then analyse even when the target failed (its exit code is kept for the caller)."""
    from tracer.gpu import require_gpu_for_capture

    checked = time.monotonic()
    require_gpu_for_capture()  # "no GPU" before anything the capture tools would say
    gpu_check = time.monotonic() - checked
    warm = threading.Thread(target=_import_analysis, daemon=True)
    warm.start()
    with staged(req.output) as tmp:
        logs = tmp / "logs"
        logs.mkdir()
        res, captured = _capture(req, tmp, logs)
        warm.join()
        from tracer.readers.job import is_job_dir

        job = is_job_dir(tmp)  # as `trace analyze` will read it
        write_json(tmp / "command.json", with_header("command", _command_fields(req, res, captured, job, gpu_check)))
        write_json(tmp / "environment.json", with_header("environment", captured.environment if captured and captured.environment
                                                                   else environment()))
        if not (tmp / "trace.sqlite").is_file() and not (captured and captured.job):
            raise_if_timed_out(res, f"the capture of {req.name}")  # stopped with nothing to analyse
            raise _no_trace(req, res, captured)
        analysis = _analyse(tmp, req.output, pairs, hazards, job)
        endings = process_endings(analysis, captured)
        write_json(tmp / "verdict.json", analysis.to_json() | {
            "target_exit": res.returncode, "partial": bool(captured and captured.partial),
            "stopped": res.stopped or None, "ending": [e.to_json() for e in endings],
            "untraced": untraced_json(captured)})
    return Recorded(run_dir=req.output, target_exit=res.returncode, analysis=analysis, captured=captured, endings=endings, proc=res)


def untraced_json(captured: CaptureResult | None) -> list[dict[str, Any]] | None:
    """The command's processes tracer did not trace, with whether each held a GPU (None: the
    nsys backend, which traces the whole tree itself)."""
    if captured is None:
        return None
    keys = ("pid", "ppid", "comm", "cmdline", "gpu")
    return [{k: u.get(k) for k in keys} for u in captured.untraced]


def process_endings(analysis: Verdicts, captured: CaptureResult | None) -> tuple[ProcessEnd, ...]:
    """Where each traced process's streams stood at its end (the job's processes, or the one
    whose trace stands for the run)."""
    from tracer.analysis.analyze import Analysis
    from tracer.analysis.ending import process_end

    if isinstance(analysis, Analysis):
        busy = max(captured.processes, key=lambda m: m.kernels or 0) if captured and captured.processes else None
        from tracer.capture.launcher import how_ended

        label, how = (busy.file, how_ended(busy)) if busy else ("process", "ended")
        return (process_end(label, how, analysis.trace, busy.unflushed_s if busy else None),)
    unflushed = {m.file: m.unflushed_s for m in (captured.processes if captured else ())}
    return tuple(process_end(p.label, p.how, a.trace, unflushed.get(p.file))
                 for p, a in zip(analysis.job.processes, analysis.analyses) if a is not None)


def ending_error(rec: Recorded) -> TimedOut | TargetFailed | None:
    """What the command's ending makes of the run, raised after its verdicts: stopped at --timeout or
    Ctrl-C (exit 8), or the target failed (exit 7)."""
    res = rec.proc
    if res is None or rec.stopped not in ("timeout", "interrupt"):
        return TargetFailed(rec.target_failure) if rec.target_failure else None
    why = f"killed at its --timeout of {res.limit_s:g} s" if rec.stopped == "timeout" else "stopped at Ctrl-C"
    return TimedOut(f"the traced command was {why} (the whole process group); its traces up to then were analysed "
                    f"as a partial run: {rec.run_dir}")


def _command_fields(req: CaptureRequest, res: ProcResult, captured: CaptureResult | None, job: bool,
                    gpu_check: float) -> dict[str, object]:
    """command.json: the command, how it ended; with CUPTI its processes, and tracer's own seconds
    around it (`tracer_s`: the GPU check, the set-up before it, the settling after it)."""
    out: dict[str, object] = {"argv": list(req.command), "backend": req.backend, "exit": res.returncode,
                              "timed_out": res.timed_out, "stopped": res.stopped or None, "stop_after": req.stop_after,
                              "seconds": round(res.seconds, 3), "capture_argv": list(res.argv)}
    if captured is None:
        return out
    fields = captured.command_fields()
    return out | fields | {"job": job, "tracer_s": {"gpu_check": round(gpu_check, 4), **fields["tracer_s"]}}


def _import_analysis() -> None:
    """Import the analysis while the command runs (this process only waits for it then), so that
    neither the command's start nor the verdict after it waits for numpy and the readers."""
    try:
        import tracer.analysis.analyze
        import tracer.analysis.job_summary
        import tracer.views.job_text
        import tracer.readers.load  # noqa: F401  # imported for its side effect: loaded ahead
    except Exception:  # the same import after the command reports it
        pass


def _analyse(tmp: Path, final: Path, pairs: PairSpec, hazards: bool, job: bool) -> Verdicts:
    """The run's trace, or the job (every process on its own, then collectives, stragglers and
    clocks), read under the temporary name and named by the final one."""
    if job:
        from tracer.readers.job import load_job
        from tracer.analysis.job_summary import analyze_job

        return analyze_job(load_job(tmp).moved_to(final), pairs, hazards)
    from tracer.analysis.analyze import analyze
    from tracer.readers.load import load_trace

    trace = load_trace(tmp / "trace.sqlite")
    return analyze(replace(trace, source=str(final / "trace.sqlite")), pairs, hazards=hazards)


def _no_trace(req: CaptureRequest, res: ProcResult, captured: CaptureResult | None) -> Exception:
    """Nothing to analyse: the command's failure (exit 7) when it failed, else a usage error (exit 2)."""
    if captured is None:
        tail = " | ".join(res.stderr().strip().splitlines()[-3:])[-300:]
        return UsageError(f"capture of {req.name} produced no trace (exit {res.returncode}); "
                          f"stderr ends: {tail or '(empty)'}")
    from tracer.capture.launcher import outcome_summary

    failure = captured.failure()
    if failure:
        return TargetFailed(f"{failure}; no process recorded a CUDA kernel ({outcome_summary(captured)})")
    missed = [p.file for p in captured.processes if p.untraced_cuda]
    why = f"; {', '.join(missed)} used CUDA by a path tracer does not see" if missed else ""
    return UsageError(f"no process of the command recorded a CUDA kernel ({outcome_summary(captured)}{why}): "
                      f"nothing to analyse")


def process_notices(captured: CaptureResult, run_dir: Path, job: bool, listed: bool = False) -> list[str]:
    from tracer.capture.launcher import describe
    from tracer.format.procs import Outcome

    procs = captured.processes
    lines = []
    unwell = any(p.untraced_cuda or p.outcome not in (Outcome.COMPLETE, Outcome.NO_CUDA) for p in procs)
    if not listed and (len(procs) > 1 or unwell):
        quiet = [p for p in procs if _quiet(p)]
        folded = quiet if len(quiet) > 2 else []  # a compiler's worker pool, say: one line, not dozens
        lines += [f"processes ({len(procs)}):", *(describe(p) for p in procs if not (folded and _quiet(p)))]
        if folded:
            forks = sum(1 for p in folded if p.fork_child)
            lines.append(f"  ... and {len(folded)} more processes ({forks} of them fork children) that exited 0 "
                         "with no CUDA kernels: each in command.json")
    if captured.partial and not job:
        lines.append("tracer: warning: the trace is PARTIAL (its process died): what it flushed before dying")
    if job:
        busy = [p.file for p in procs if (p.kernels or 0) > 0]
        lines.append(f"job: {len(busy)} process{'es' if len(busy) != 1 else ''} recorded kernels ({', '.join(busy)}), "
                     f"traces in {run_dir}/procs: analysed as one job (`tracer trace analyze {run_dir}` again)")
    return lines


def _quiet(p: Marker) -> bool:
    """A process that ended well and recorded nothing: no kernels, no rank, no CUDA trouble."""
    return (p.state is State.EXITED and not p.exit and p.ended != "sigterm" and not p.kernels
            and p.rank is None and not p.untraced_cuda and not p.trace_error)


def import_run(run: TraceRun, output: Path, pairs: PairSpec, hazards: bool = True) -> Recorded:
    """A run directory from a trace made elsewhere (a copy of it, command.json, verdict.json)."""
    from tracer.analysis.analyze import analyze

    analysis = analyze(run.load(), pairs, hazards=hazards)
    with staged(output) as tmp:
        src = run.trace_file
        copy_file(src, tmp / ("trace.sqlite" if src.suffix == ".sqlite" else src.name))
        write_json(tmp / "command.json", with_header("command", {"imported_from": str(run.path.resolve()), "backend": "import"}))
        write_json(tmp / "verdict.json", analysis.to_json())
    return Recorded(run_dir=output, target_exit=None, analysis=analysis)
