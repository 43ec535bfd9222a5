"""`trace run`: capture a command into a run directory (trace.sqlite, command.json,
environment.json, logs/), analyse it and write verdict.json; the directory is written under a
temporary name and renamed when complete."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracer.artifact import TraceRun
from tracer.errors import UsageError, unknown
from tracer.proc import check_timeout, raise_if_timed_out
from tracer.store.atomic import copy_file
from tracer.store.rundir import environment, staged, write_json
from tracer.trace.analyze import Analysis, analyze
from tracer.trace.pairs import PairSpec

BACKENDS = ("auto", "nsys", "cupti")


@dataclass(frozen=True)
class CaptureRequest:
    name: str
    command: tuple[str, ...]
    backend: str  # nsys or cupti (see choose_backend)
    output: Path
    timeout: float
    cuda_event_trace: bool = False
    capture_range: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", check_timeout(self.timeout))


@dataclass(frozen=True)
class Recorded:
    run_dir: Path
    target_exit: int | None  # None: imported (no target ran)
    analysis: Analysis

    @property
    def target_failure(self) -> str:
        """Why the traced command counts as failed ("" when it exited 0 or nothing ran)."""
        if self.target_exit in (0, None):
            return ""
        how = f"was killed by signal {-self.target_exit}" if self.target_exit < 0 else f"exited {self.target_exit}"
        return (f"the traced command {how}; its trace was written and analysed all the same: {self.run_dir} "
                f"(logs in {self.run_dir / 'logs'})")


def choose_backend(name: str) -> str:
    """auto: nsys when it can write reports, else CUPTI."""
    if name not in BACKENDS:
        raise unknown("backend", name, BACKENDS)
    if name != "auto":
        return name
    from tracer.capture.nsys import importer_status

    return "nsys" if importer_status()[0] else "cupti"


def _capture(req: CaptureRequest, out: Path, logs: Path):  # type: ignore[no-untyped-def]
    if req.backend == "nsys":
        from tracer.capture.nsys import capture

        return capture(list(req.command), out, logs, req.timeout, cuda_event_trace=req.cuda_event_trace,
                       capture_range=req.capture_range)
    from tracer.capture.cupti import capture as cupti_capture

    return cupti_capture(list(req.command), out, logs, req.timeout)


def record(req: CaptureRequest, pairs: PairSpec, hazards: bool = True) -> Recorded:
    """Capture, then analyse even when the target failed (its exit code is kept for the caller)."""
    from tracer.gpu import require_gpu_for_capture
    from tracer.trace.load import load_trace

    require_gpu_for_capture()  # "no GPU" before anything the capture tools would say

    with staged(req.output) as tmp:
        logs = tmp / "logs"
        logs.mkdir()
        res = _capture(req, tmp / "trace.sqlite", logs)
        write_json(tmp / "command.json", {"argv": list(req.command), "backend": req.backend, "exit": res.returncode,
                                          "timed_out": res.timed_out, "seconds": round(res.seconds, 3),
                                          "capture_argv": list(res.argv)})
        write_json(tmp / "environment.json", environment())
        raise_if_timed_out(res, f"the capture of {req.name}")
        if not (tmp / "trace.sqlite").is_file():
            tail = " | ".join(res.stderr().strip().splitlines()[-3:])[-300:]
            raise UsageError(f"capture of {req.name} produced no trace (exit {res.returncode}); "
                             f"stderr ends: {tail or '(empty)'}")
        analysis = analyze(load_trace(tmp / "trace.sqlite"), pairs, hazards=hazards)
        write_json(tmp / "verdict.json", analysis.to_json() | {"target_exit": res.returncode})
    return Recorded(req.output, res.returncode, analysis)


def import_run(run: TraceRun, output: Path, pairs: PairSpec, hazards: bool = True) -> Recorded:
    """A run directory from a trace made elsewhere (a copy of it, command.json, verdict.json)."""
    analysis = analyze(run.load(), pairs, hazards=hazards)
    with staged(output) as tmp:
        src = run.trace_file
        copy_file(src, tmp / ("trace.sqlite" if src.suffix == ".sqlite" else src.name))
        write_json(tmp / "command.json", {"imported_from": str(run.path.resolve()), "backend": "import"})
        write_json(tmp / "verdict.json", analysis.to_json())
    return Recorded(output, None, analysis)
