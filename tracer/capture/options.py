"""Capture options: what `trace run` passes to every traced process through the environment.
Imported by the bootstrap in every Python process of a traced command: keep it light."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

ENV_DIR = "TRACER_CAPTURE_DIR"
ENV_OPTIONS = "TRACER_CAPTURE_OPTIONS"
BACKENDS = ("cupti", "fake")
# Whether `trace run` records memory access sets unless told (--memory/--no-memory): decided from
# the measured overhead (scripts/bench_memory_capture.py, docs/benchmarks.md).
MEMORY_DEFAULT = False


@dataclass(frozen=True)
class CaptureOptions:
    backend: str = "cupti"  # "fake": same bootstrap, files and markers, no CUPTI (CPU tests)
    memory: bool = False
    devices: tuple[str, ...] = ("cuda",)  # tensor device types the memory recorder records (tests use "cpu")

    def to_env(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

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
        backend = data.get("backend", "cupti")
        devices = data.get("devices", ["cuda"])
        return cls(backend=backend if backend in BACKENDS else "cupti", memory=bool(data.get("memory", False)),
                   devices=tuple(str(d) for d in devices) if isinstance(devices, list) else ("cuda",))
