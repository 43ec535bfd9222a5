"""Capture options: what `trace run` passes to every traced process through the environment.
Imported by the bootstrap in every Python process of a traced command: keep it light."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

ENV_DIR = "TRACER_CAPTURE_DIR"
ENV_OPTIONS = "TRACER_CAPTURE_OPTIONS"
STOP_FILE = "STOP"  # `trace run --stop-after`: once in the capture folder, traced processes finish their traces
BACKENDS = ("cupti", "fake")
# Whether `trace run` records memory access sets unless told (--memory/--no-memory): decided from
# the measured overhead (scripts/bench_memory_capture.py, docs/benchmarks.md).
MEMORY_DEFAULT = False
# The parts of `--memory`, each switchable for the overhead benchmark (all on for users):
# dispatch: the TorchDispatchMode (torch ops); launch_args: CUPTI callbacks on kernel launches
# outside ops; allocator: torch's caching-allocator reports (allocation instances split at free);
# host_queries: CUPTI callbacks on event records and event/stream queries.
MEMORY_PARTS = ("dispatch", "launch_args", "allocator", "host_queries")
# API activity records: "filtered" leaves out the getters (cudaGetDevice, cuCtxGetCurrent, ...),
# which enqueue no work and order nothing; "all" records every call.
API_RECORDS = ("filtered", "all")
# Importing one of these starts CUPTI in a process (lazy start); torch starts it at its CUDA
# initialisation instead (torch._C._cuda_init), so a process that imports torch and never uses
# CUDA (torchrun's agent) never loads CUPTI. Not cuda.bindings: torch imports it at its own import.
# A process that reaches CUDA by another path is flagged at exit (marker `untraced_cuda`).
CUDA_MODULES = ("cuda.core", "cupy", "numba.cuda", "triton", "jax", "jaxlib", "tensorflow", "pycuda")


@dataclass(frozen=True, kw_only=True)
class CaptureOptions:
    backend: str = "cupti"  # "fake": same bootstrap, files and markers, no CUPTI (CPU tests)
    memory: bool = False
    devices: tuple[str, ...] = ("cuda",)  # tensor device types the memory recorder records (tests use "cpu")
    parts: tuple[str, ...] = MEMORY_PARTS  # which parts of --memory run (see MEMORY_PARTS)
    # The memory capture window (tracer/capture/window.py): "A:B" records memory sets only inside
    # NVTX step ranges A to B-1, a glob only inside NVTX ranges matching it; both empty: the whole run.
    memory_steps: str = ""
    memory_range: str = ""
    apis: str = "filtered"
    # Records written to the process's trace file at least this often (0: only at exit): what a
    # SIGKILL or the OOM killer can cost. 0.5 s measured (scripts/bench_flush.py, docs/benchmarks.md).
    flush_s: float = 0.5
    # After a device synchronisation: a forced flush, unless one ran less than this long ago (the
    # first synchronisation always flushes: a short program's only one may be its last).
    sync_flush_s: float = 0.1
    lazy: bool = True  # start CUPTI at the first CUDA use (False: when the process starts)
    triggers: tuple[str, ...] = CUDA_MODULES

    def to_env(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def has(self, part: str) -> bool:
        return self.memory and part in self.parts

    @classmethod
    def from_env(cls, text: str | None) -> CaptureOptions:
        """Unknown keys are ignored and bad values fall back to the defaults: a traced program is
        never stopped by its tracer's options."""
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        d = cls()
        return cls(backend=_choice(data.get("backend"), BACKENDS, d.backend), memory=bool(data.get("memory", d.memory)),
                   devices=_names(data.get("devices"), d.devices), parts=_names(data.get("parts"), d.parts),
                   memory_steps=_text(data.get("memory_steps")), memory_range=_text(data.get("memory_range")),
                   apis=_choice(data.get("apis"), API_RECORDS, d.apis), flush_s=_seconds(data.get("flush_s"), d.flush_s),
                   sync_flush_s=_seconds(data.get("sync_flush_s"), d.sync_flush_s),
                   lazy=bool(data.get("lazy", d.lazy)), triggers=_names(data.get("triggers"), d.triggers))


def _choice(value: object, allowed: tuple[str, ...], default: str) -> str:
    return value if isinstance(value, str) and value in allowed else default


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _names(value: object, default: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else default


def _seconds(value: object, default: float) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else default

