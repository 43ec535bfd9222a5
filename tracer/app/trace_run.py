"""`trace run`: capture a command into a run directory (trace.sqlite, command.json,
environment.json, logs/; with CUPTI also procs/: one marker and trace per traced process),
analyse it and write verdict.json; the directory is written under a temporary name and renamed
when complete. A run that reads as a job (several processes with kernels, or markers of several
ranks) is analysed as `trace analyze` reads a job: every process on its own, then collectives,
stragglers and clocks. A run where no process recorded a kernel is never analysed (an empty trace
proves nothing): it fails, and its files are kept as DIR.failed."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracer.artifact import TraceRun
from tracer.capture.options import MEMORY_DEFAULT
from tracer.errors import TargetFailed, UsageError, unknown
from tracer.proc import ProcResult, check_timeout, raise_if_timed_out
from tracer.store.atomic import copy_file
from tracer.store.rundir import environment, staged, write_json
from tracer.trace.pairs import PairSpec

if TYPE_CHECKING:
    from tracer.capture.launcher import CaptureResult
    from tracer.trace.analyze import Analysis
    from tracer.trace.job_summary import JobAnalysis

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

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", check_timeout(self.timeout))
        if self.memory and self.backend != "cupti":
            raise UsageError(f"--memory needs the cupti backend, not {self.backend!r}")


@dataclass(frozen=True)
class Recorded:
    run_dir: Path
    target_exit: int | None  # None: imported (no target ran)
    analysis: Verdicts  # a JobAnalysis when the run directory reads as a job (procs/ of several ranks)
    captured: CaptureResult | None = None  # CUPTI: every process and how it ended

    @property
    def job(self) -> bool:
        from tracer.trace.analyze import Analysis

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
        a partial trace, a job."""
        return process_notices(self.captured, self.run_dir, self.job, listed) if self.captured is not None else []


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


def capture_mode(backend: str, memory: bool | None) -> tuple[str, bool]:
    """(backend, memory) of `trace run --backend B [--memory|--no-memory]`: memory access sets need
    CUPTI, so `auto` picks it for them; --memory with nsys is a usage error (CaptureRequest)."""
    wanted = MEMORY_DEFAULT if memory is None else memory
    if wanted and backend == "auto":
        return "cupti", True
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

    captured = capture_run(list(req.command), run_dir, logs, req.timeout, memory=req.memory, describe=True)
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
        from tracer.trace.job import is_job_dir

        job = is_job_dir(tmp)  # as `trace analyze` will read it
        write_json(tmp / "command.json", _command_fields(req, res, captured, job, gpu_check))
        write_json(tmp / "environment.json", captured.environment if captured and captured.environment else environment())
        raise_if_timed_out(res, f"the capture of {req.name}")
        if not (tmp / "trace.sqlite").is_file() and not (captured and captured.job):
            raise _no_trace(req, res, captured)
        analysis = _analyse(tmp, req.output, pairs, hazards, job)
        write_json(tmp / "verdict.json", analysis.to_json() | {"target_exit": res.returncode,
                                                               "partial": bool(captured and captured.partial)})
    return Recorded(req.output, res.returncode, analysis, captured)


def _command_fields(req: CaptureRequest, res: ProcResult, captured: CaptureResult | None, job: bool,
                    gpu_check: float) -> dict[str, object]:
    """command.json: the command, how it ended; with CUPTI its processes, and tracer's own seconds
    around it (`tracer_s`: the GPU check, the set-up before it, the settling after it)."""
    out: dict[str, object] = {"argv": list(req.command), "backend": req.backend, "exit": res.returncode,
                              "timed_out": res.timed_out, "seconds": round(res.seconds, 3), "capture_argv": list(res.argv)}
    if captured is None:
        return out
    fields = captured.command_fields()
    return out | fields | {"job": job, "tracer_s": {"gpu_check": round(gpu_check, 4), **fields["tracer_s"]}}


def _import_analysis() -> None:
    """Import the analysis while the command runs (this process only waits for it then), so that
    neither the command's start nor the verdict after it waits for numpy and the readers."""
    try:
        import tracer.trace.analyze
        import tracer.trace.job_summary
        import tracer.trace.job_text
        import tracer.trace.load  # noqa: F401  # imported for its side effect: loaded ahead
    except Exception:  # the same import after the command reports it
        pass


def _analyse(tmp: Path, final: Path, pairs: PairSpec, hazards: bool, job: bool) -> Verdicts:
    """The run's trace, or the job (every process on its own, then collectives, stragglers and
    clocks), read under the temporary name and named by the final one."""
    if job:
        from tracer.trace.job import load_job
        from tracer.trace.job_summary import analyze_job

        return analyze_job(load_job(tmp).moved_to(final), pairs, hazards)
    from tracer.trace.analyze import analyze
    from tracer.trace.load import load_trace

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
    missed = [p["file"] for p in captured.processes if p.get("untraced_cuda")]
    why = f"; {', '.join(missed)} used CUDA by a path tracer does not see" if missed else ""
    return UsageError(f"no process of the command recorded a CUDA kernel ({outcome_summary(captured)}{why}): "
                      f"nothing to analyse")


def process_notices(captured: CaptureResult, run_dir: Path, job: bool, listed: bool = False) -> list[str]:
    from tracer.capture.launcher import describe
    from tracer.format.procs import Outcome

    procs = captured.processes
    lines = []
    unwell = any(p.get("untraced_cuda") or p.get("outcome") not in (Outcome.COMPLETE, Outcome.NO_CUDA) for p in procs)
    if not listed and (len(procs) > 1 or unwell):
        quiet = [p for p in procs if _quiet(p)]
        folded = quiet if len(quiet) > 2 else []  # a compiler's worker pool, say: one line, not dozens
        lines += [f"processes ({len(procs)}):", *(describe(p) for p in procs if not (folded and _quiet(p)))]
        if folded:
            forks = sum(1 for p in folded if p.get("fork_child"))
            lines.append(f"  ... and {len(folded)} more processes ({forks} of them fork children) that exited 0 "
                         "with no CUDA kernels: each in command.json")
    if captured.partial and not job:
        lines.append("tracer: warning: the trace is PARTIAL (its process died): what it flushed before dying")
    if job:
        busy = [p["file"] for p in procs if (p.get("kernels") or 0) > 0]
        lines.append(f"job: {len(busy)} process{'es' if len(busy) != 1 else ''} recorded kernels ({', '.join(busy)}), "
                     f"traces in {run_dir}/procs: analysed as one job (`tracer trace analyze {run_dir}` again)")
    return lines


def _quiet(p: dict[str, Any]) -> bool:
    """A process that ended well and recorded nothing: no kernels, no rank, no CUDA trouble."""
    return (p.get("state") == "exited" and not p.get("exit") and p.get("ended") != "sigterm" and not p.get("kernels")
            and p.get("rank") is None and not p.get("untraced_cuda") and not p.get("trace_error"))


def import_run(run: TraceRun, output: Path, pairs: PairSpec, hazards: bool = True) -> Recorded:
    """A run directory from a trace made elsewhere (a copy of it, command.json, verdict.json)."""
    from tracer.trace.analyze import analyze

    analysis = analyze(run.load(), pairs, hazards=hazards)
    with staged(output) as tmp:
        src = run.trace_file
        copy_file(src, tmp / ("trace.sqlite" if src.suffix == ".sqlite" else src.name))
        write_json(tmp / "command.json", {"imported_from": str(run.path.resolve()), "backend": "import"})
        write_json(tmp / "verdict.json", analysis.to_json())
    return Recorded(output, None, analysis)
