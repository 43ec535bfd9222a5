"""The synthetic trace builder of scripts/make_synthetic_trace.py (the nsys schema plus the TRACER_*
memory tables of docs/design/capture-memory-jobs.md), for CPU tests of shapes no capture has yet."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parent.parent / "scripts" / "make_synthetic_trace.py"
_spec = importlib.util.spec_from_file_location("make_synthetic_trace", _PATH)
assert _spec is not None and _spec.loader is not None
synthetic = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("make_synthetic_trace", synthetic)
_spec.loader.exec_module(synthetic)

TraceBuilder = synthetic.TraceBuilder
generate = synthetic.generate
STREAMS = synthetic.STREAMS
