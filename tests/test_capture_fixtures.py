"""Captures made on an H200 (scripts/device_capture.sh), read on CPU: the hazard test programs
under `trace run --memory` (tests/data/hazards/, scripts/capture_hazard_fixtures.py; captures.json
says how each was made) hold the cross-stream overlaps each program is built to have, with the
expectations of the GPU tests (tests/gpu/memory_tables.py); the seed workloads hold their
cast_transpose -> dgrad GEMM read; a torchrun DDP job over gloo, 2 ranks on one GPU
(tests/data/jobs/ddp_gloo_2ranks/, a run directory as `trace run` left it) holds one trace per
rank. Checkout and interpreter folders were cut from the strings (--strip-paths)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tracer.capture.launcher import pick_trace, read_markers
from tracer.readers.load import load_trace

ROOT = Path(__file__).resolve().parent.parent
HAZARDS = ROOT / "tests" / "data" / "hazards"
DDP = ROOT / "tests" / "data" / "jobs" / "ddp_gloo_2ranks"


def memory_tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("memory_tables", ROOT / "tests" / "gpu" / "memory_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MT = memory_tables()
meta = MT.meta


@pytest.mark.parametrize("program", sorted(MT.EXPECTED))
def test_each_program_capture_holds_the_overlaps_it_is_built_to_have(program: str) -> None:
    db = HAZARDS / f"{program}.sqlite"
    entry = json.loads((HAZARDS / "captures.json").read_text())[program]
    assert entry["exit"] == 0 and entry["expected"] == sorted(MT.EXPECTED[program]) and entry["may"] is (program in MT.MAY)
    assert meta(db)["TRACER_MEMORY"] == "1" and len(load_trace(db).kernels) > 0
    ok, seen = MT.raw_verdict(program, db)
    assert ok, seen
    found = MT.overlaps(MT.kernel_accesses(db), MT.range_window(db, "step0"))
    if program in ("same_stream", "inplace_disjoint"):
        assert found == []
    for kind in MT.EXPECTED[program]:
        hits = [(p, c) for k, p, c in found if k == kind]
        assert hits, (program, seen)
        if program in MT.MAY:  # the reader's arguments: guessed direction, from the launch's pointers
            assert any(c.op_kind == 3 and c.exact == 0 for _, c in hits)
        else:
            assert all(p.exact == c.exact == 1 for p, c in hits)


@pytest.mark.parametrize("workload", ["planted_cross_stream", "event_ordered_dgrad"])
def test_seed_workloads_hold_the_cast_transpose_to_dgrad_read(workload: str) -> None:
    db = HAZARDS / f"{workload}.sqlite"
    found = MT.overlaps(MT.kernel_accesses(db), (0, 2**63))
    raw = [(p, c) for k, p, c in found if k == "RAW" and p.kernel == "cast_transpose" and c.kernel.startswith("nvjet")]
    assert raw and all(p.op_kind == 2 and p.exact == 1 for p, _ in raw)  # tracer's own launch: exact accesses


def test_the_ddp_job_holds_one_trace_per_rank() -> None:
    command = json.loads((DDP / "command.json").read_text())
    markers = {m.file: m for m in read_markers(DDP / "procs")}
    ranks = {p["rank"]: p for p in command["processes"] if p["rank"] is not None}
    assert command["job"] and set(ranks) == {0, 1} and command["exit"] == 0
    for rank, p in ranks.items():
        trace = load_trace(DDP / "procs" / f"{p['file']}.sqlite")
        assert len(trace.kernels) == p["kernels"] == markers[p["file"]].kernels > 0
        assert {"step0", "step1", "step2"} <= {trace.strings[n] for n in trace.ranges.text}
        assert markers[p["file"]].world_size == 2 and p["file"].endswith(f"-r{rank}")
    assert pick_trace(list(markers.values()), DDP / "procs") == (None, True)  # a job: no one trace stands for it
