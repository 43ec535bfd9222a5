"""Issue #26's captured programs (tests/gpu/programs/ops_*.py, captured on the H200 by
scripts/device_ops.sh and collected by scripts/capture_hazard_fixtures.py --ops): copies, memsets and
CUDA graph launches judged on CPU. Each must show exactly the hazard kinds it plants, as often as
captures.json says, with every operation judged; and a copy that loses its memory set is counted as
not judged, never as clean."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.trace_synthetic import copy_with
from tracer.analysis.analyze import Analysis, analyze
from tracer.readers.load import load_trace
from tracer.analysis.ordering import Verdict
from tracer.analysis.pairs import PairSpec

FIXTURES = DATA / "hazards"
CAPTURES = json.loads((FIXTURES / "captures.json").read_text())
OPS = sorted(p for p in CAPTURES if p.startswith("ops_"))
KINDS = ("RAW", "WAR", "WAW", "reuse")


def analysed(program: str, **kw: object) -> Analysis:
    return analyze(load_trace(FIXTURES / f"{program}.sqlite"), **kw)


def test_the_family_is_all_there() -> None:
    assert OPS == ["ops_copy3d", "ops_d2d_no_wait", "ops_d2h_pinned_waw", "ops_driver_copies", "ops_graph_branches", "ops_graph_edge",
                   "ops_graph_written_stream", "ops_h2d_no_wait", "ops_h2d_wait_stream", "ops_prefetch", "ops_zero_war"]


@pytest.mark.parametrize("program", OPS)
def test_each_program_gets_exactly_its_hazards_and_judges_everything(program: str) -> None:
    entry = CAPTURES[program]
    a = analysed(program)
    h = a.hazards
    assert h is not None and h.memory
    counts = dict(h.counts)
    found = {k: counts[k] for k in KINDS if counts[k]}
    assert set(found) == set(entry["expected"]), (program, counts)  # no kind it does not plant
    assert all(found[k] >= n for k, n in entry["expected"].items()), (program, counts)  # once per iteration or replay
    assert counts["may"] == entry["may"]
    assert h.not_judged == () and a.failures(False, True) == ([f"{h.found} cross-stream memory hazard(s)"] if h.found else [])
    ops = a.to_json()["operations"]
    assert ops["memcpy"] >= 1, ops  # every program copies
    assert h.text_lines()[0].startswith(f"hazards: {h.found} (") and "judged" in h.text_lines()[0]


def test_h2d_from_pinned_memory_is_the_copy_against_the_kernel() -> None:
    h = analysed("ops_h2d_no_wait").hazards
    assert h is not None
    assert {(z.producer.kernel, z.producer.op, z.producer.range, z.consumer.range) for z in h.listed} == {
        ("[memcpy HtoD]", "aten::copy_", "h2d", "use_h2d")}


def test_pairs_globs_match_ranges_holding_only_a_copy() -> None:
    """`--pairs 'it*/h2d:it*/use_h2d'` was a usage error ("matches no NVTX range holding a kernel")."""
    spec = PairSpec.of([("h2d", "use_h2d")])
    bad = analysed("ops_h2d_no_wait", pairs=spec)
    good = analysed("ops_h2d_wait_stream", pairs=spec)
    assert {(p.verdict, p.producer_op, p.consumer_op) for p in bad.pairs} == {(Verdict.UNORDERED, "memcpy", "kernel")}
    assert {p.verdict for p in good.pairs} == {Verdict.EVENT_ORDERED}


def test_d2h_into_pinned_memory_is_a_write_of_the_host_range() -> None:
    h = analysed("ops_d2h_pinned_waw").hazards
    assert h is not None and len(h.listed) == 1
    z = h.listed[0]
    assert (z.kind.value, z.producer.kernel, z.consumer.kernel) == ("WAW", "[memcpy DtoH]", "[memcpy DtoH]")
    assert z.producer.stream != z.consumer.stream and z.allocation is not None and z.allocation.bytes == 4 << 20


def test_driver_copies_get_their_bytes_from_the_api_arguments() -> None:
    """cuMemcpyDtoDAsync, cudaMemcpy2DAsync (pitched: 256 rows of 1 KiB in 4 KiB rows, a `may`),
    cuMemcpyPeerAsync and cuMemsetD32Async, none inside a torch op."""
    h = analysed("ops_driver_copies").hazards
    assert h is not None
    got = sorted((z.kind.value, z.may, z.consumer.op or "", z.bytes) for z in h.listed)
    assert got == [("RAW", False, "cuMemcpyDtoDAsync", 4 << 20), ("RAW", False, "cuMemcpyPeerAsync", 4 << 20),
                   ("RAW", True, "cudaMemcpy2DAsync", 4096 * 255 + 1024), ("WAR", False, "cuMemsetD32Async", 4 << 20)]


def test_3d_copies_get_their_bytes_from_the_api_parameters() -> None:
    """cudaMemcpy3DAsync and cuMemcpy3DAsync each read a box of 8 slices of 32 rows of 512 bytes out of
    a 1 KiB-pitched, 64-row volume the side stream writes: one byte range holding the box (its gaps
    counted in, so a `may`), from the copy's own position (x 16, y 2, z 3; then z 1)."""
    h = analysed("ops_copy3d").hazards
    assert h is not None
    span = 1024 * 64 * 7 + 1024 * 31 + 512
    got = sorted((z.kind.value, z.may, z.consumer.op or "", z.bytes) for z in h.listed)
    assert got == [("RAW", True, "cuMemcpy3DAsync", span), ("RAW", True, "cudaMemcpy3DAsync", span)]
    starts = {z.consumer.op: z.address for z in h.listed}
    assert starts["cudaMemcpy3DAsync"] - starts["cuMemcpy3DAsync"] == (3 - 1) * 1024 * 64 + 2 * 1024 + 16


def test_graph_branch_race_is_found_in_each_replay_and_never_between_replays() -> None:
    a = analysed("ops_graph_branches")
    h = a.hazards
    assert h is not None
    assert sorted({z.producer.range for z in h.listed}) == ["replay0", "replay1", "replay2"]
    assert all(z.producer.range == z.consumer.range for z in h.listed)
    # the fill against the sum op, once per replay (the op's memset and reduce kernel share its accesses)
    assert all("FillFunctor" in z.producer.kernel for z in h.listed) and dict(h.counts)["RAW"] == 3
    assert {(z.producer.op, z.consumer.op) for z in h.listed} == {("aten::fill_.Scalar", "aten::sum.IntList_out")}
    assert a.to_json()["graph_launches"] == {"launches": 3, "operations": 9, "branched": 3, "stream_recorded": 3}
    assert {c.kind.value: c.unjudged for c in h.coverage}["graph-internal"] == 0


def test_without_its_edges_a_branched_graph_is_counted_not_judged(tmp_path: Path) -> None:
    """The same capture with TRACER_GRAPH_EDGES dropped (a capture that could not read them): no
    hazard between replays, and the branches' pairs fail the check as not judged."""
    path = copy_with(FIXTURES / "ops_graph_branches.sqlite", tmp_path / "t.sqlite", "DELETE FROM TRACER_GRAPH_EDGES")
    a = analyze(load_trace(path))
    h = a.hazards
    assert h is not None and h.found == 0
    assert {c.kind.value: (c.seen, c.unjudged) for c in h.coverage}["graph-internal"] == (9, 9)
    assert [f for f in a.failures(False, True) if "graph-internal" in f]


def test_copies_whose_records_lack_addresses_are_not_judged_never_clean(tmp_path: Path) -> None:
    """ops_driver_copies with its copy-argument ops (TRACER_OPS kind 4) dropped: the copies and the
    memset have no bytes, so they are counted as not judged and --fail-on-hazard fails."""
    path = copy_with(FIXTURES / "ops_driver_copies.sqlite", tmp_path / "t.sqlite",
                     "DELETE FROM TRACER_MEMORY_ACCESS WHERE opId IN (SELECT id FROM TRACER_OPS WHERE kind = 4)",
                     "DELETE FROM TRACER_OPS WHERE kind = 4")
    a = analyze(load_trace(path))
    h = a.hazards
    assert h is not None and h.found == 0
    cov = {c.kind.value: (c.seen, c.judged, c.unjudged) for c in h.coverage}
    assert cov["memcpy"][2] == 3 and cov["memset"][2] == 1
    assert len([f for f in a.failures(False, True) if f.startswith("not judged")]) == 2
    assert not h.text_lines()[0].endswith("judged 19 of 19 GPU operations (kernel 11/11, memcpy 5/5, memset 3/3)")
