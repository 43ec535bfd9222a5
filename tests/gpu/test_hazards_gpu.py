"""On a GPU: each test program (tests/gpu/programs/) under `tracer trace run --memory` records the
memory its kernels touch, and the hazards it is built to have (or none) are found. Until the
hazard analysis is in the verdict JSON (`hazards`), the raw tables are checked: the overlapping
accesses exist, with the right directions and streams (memory_tables.raw_verdict)."""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from memory_tables import EXPECTED, MAY, PROGRAMS, kernel_accesses, meta, overlaps, range_window, raw_verdict
from tracer.cli import main

pytestmark = pytest.mark.gpu
HAZARD_KINDS = ("RAW", "WAR", "WAW", "reuse")


def unattributed_kernels(run: Path) -> tuple[int, int]:
    """(kernels in no NVTX range, kernels): the verdict's attribution counts every GPU operation, and
    copies made outside every range (a batch's HtoD before the first step) are not what is checked."""
    from tracer.analysis.analyze import analyze
    from tracer.readers.load import load_trace
    from tracer.analysis.pairs import PairMode, PairSpec

    a = analyze(load_trace(run / "trace.sqlite"), PairSpec(PairMode.NONE), hazards=False)
    kernels = a.trace.kernels.kinds() == 0
    return int((kernels & (a.attribution.range_of_kernel < 0)).sum()), int(kernels.sum())


def traced(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[Path, dict]:
    run = tmp_path / "run"
    code = main(["trace", "run", "--memory", "-o", str(run), "--json", *argv])
    out = capsys.readouterr().out
    assert code == 0, (run / "logs" / "stderr.log").read_text() if (run / "logs").is_dir() else out
    return run, json.loads(out)


@pytest.mark.parametrize("program", sorted(EXPECTED))
def test_program_hazards(program: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, verdict = traced(tmp_path, capsys, "--", sys.executable, str(PROGRAMS / f"{program}.py"))
    db = run / "trace.sqlite"
    assert meta(db)["TRACER_MEMORY"] == "1"
    ok, seen = raw_verdict(program, db)
    assert ok, f"{program}: {seen}"
    hazards = verdict.get("hazards")
    if not hazards or not hazards.get("memory"):
        return  # the analysis of the tables has not landed yet: the raw check above stands
    counts = hazards["counts"]
    if EXPECTED[program]:
        assert all(counts.get(k, 0) >= 1 for k in EXPECTED[program]), counts
        assert (counts.get("may", 0) >= 1) is (program in MAY), counts
    else:
        assert sum(counts.get(k, 0) for k in HAZARD_KINDS) == 0, counts


def test_launches_outside_ops_are_decoded_or_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Triton and cuda.core kernels: their pointer arguments are matched (which parameter-info
    call worked is in the metadata), never silently skipped."""
    for program in ("triton_no_wait", "cuda_core_no_wait"):
        run, _ = traced(tmp_path / program, capsys, "--", sys.executable, str(PROGRAMS / f"{program}.py"))
        db = run / "trace.sqlite"
        info = {k: v for k, v in meta(db).items() if k.startswith("TRACER_MEMORY_PARAMINFO")}
        con = sqlite3.connect(db)
        unknown = con.execute("SELECT s.value, reason FROM TRACER_LAUNCH_UNKNOWN u JOIN StringIds s ON s.id = u.nameId").fetchall()
        con.close()
        assert info, f"{program}: no TRACER_MEMORY_PARAMINFO_* in the metadata"
        assert not [u for u in unknown if "scale2" in u[0]], unknown
        assert any(a.op_kind == 3 and "scale2" in a.kernel for a in kernel_accesses(db)), info


def test_seed_workloads_with_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """planted_cross_stream: the dgrad GEMM on the side stream reads cast_transpose's output with
    no wait; tracer's launcher recorded its exact accesses (kind 2)."""
    run, _ = traced(tmp_path, capsys, "planted_cross_stream", "--shape", "1024x1024x1024", "--steps", "2")
    accesses = kernel_accesses(run / "trace.sqlite")
    cast = [a for a in accesses if a.kernel == "cast_transpose"]
    assert cast and all(a.op_kind == 2 and a.exact == 1 for a in cast)
    found = overlaps(accesses, (0, 2**63))
    assert any(p.kernel == "cast_transpose" and k == "RAW" and p.stream != c.stream for k, p, c in found)


def test_gpt2_backward_ops_carry_forward_sequence_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, verdict = traced(tmp_path, capsys, "--", sys.executable, str(PROGRAMS / "gpt2_train.py"), "--layers", "4")
    con = sqlite3.connect(run / "trace.sqlite")
    fwd = {r[0] for r in con.execute("SELECT seqNr FROM TRACER_OPS WHERE seqNr >= 0")}
    bwd = con.execute("SELECT bwdSeqNr, globalTid FROM TRACER_OPS WHERE bwdSeqNr >= 0").fetchall()
    main_tid = con.execute("SELECT globalTid FROM TRACER_OPS ORDER BY start LIMIT 1").fetchone()[0]
    con.close()
    pointing = [b for b, _ in bwd if b in fwd]
    assert bwd and len(pointing) >= 0.95 * len(bwd)  # backward ops point at recorded forward ops (views included)
    assert any(tid != main_tid for _, tid in bwd)  # autograd's worker thread ran them
    if verdict.get("attribution_rules"):
        none, kernels = unattributed_kernels(run)
        assert none < 0.05 * kernels, verdict["attribution_rules"]
    assert range_window(run / "trace.sqlite", "step0")


def test_compiled_training_is_judged_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torch.compile'd MLP trained with batches copied on a side stream (wait_stream +
    record_stream): Inductor's Triton kernels, forward and backward, get memory sets from their
    launch arguments, backward kernels are attributed, and no hazard is reported."""
    run, verdict = traced(tmp_path, capsys, "--", sys.executable, str(PROGRAMS / "compiled_train.py"))
    h = verdict["hazards"]
    assert h["memory"] and h["kernels_without_memory"] == 0, h
    assert sum(h["counts"][k] for k in HAZARD_KINDS) == 0, h["counts"]
    assert any(a.op_kind == 3 and a.kernel.startswith("triton") for a in kernel_accesses(run / "trace.sqlite"))
    none, kernels = unattributed_kernels(run)
    assert none < 0.05 * kernels == 0.05 * verdict["kernels"], verdict["attribution_rules"]
    assert verdict["attribution_rules"].get("forward-op", 0) > 0


def test_graph_replays_get_the_access_sets_of_their_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """graph_no_wait: each replayed kernel joins, through its graph node and its clone, the op
    recorded while the graph was captured; the no-wait reader is an exact RAW on the graph's output."""
    run, verdict = traced(tmp_path, capsys, "--", sys.executable, str(PROGRAMS / "graph_no_wait.py"))
    h = verdict["hazards"]
    assert h["graph_kernels"]["replayed"] >= 4 and h["graph_kernels"]["without_memory"] == 0, h
    raw = [z for z in h["listed"] if z["kind"] == "RAW" and not z["may"]]
    assert raw and all(z["producer"]["op"].startswith(("aten::mul", "aten::relu")) for z in raw), raw
