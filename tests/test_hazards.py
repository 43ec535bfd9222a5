"""Memory hazards on synthetic traces written in the documented schema (docs/design/capture-memory-jobs.md):
address-range edge cases, every edge kind, reuse after free, `may`, and the bulk search against a
pair-by-pair reference on random traces; and the verdict on every capture of the GPU test programs
and seed workloads under `trace run --memory` on an H200 (tests/data/hazards/, captures.json)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA
from tests.trace_synthetic import TraceBuilder, hazards, load
from tracer.analysis.analyze import analyze
from tracer.analysis.attribution import attribute
from tracer.analysis.hazards import MAX_LISTED_HAZARDS, Hazards
from tracer.readers.load import load_trace
from tracer.readers.memory_reader import MAX_CLONE_DEPTH, READ, WRITE, graph_nodes, kernel_accesses
from tracer.model.trace import Trace
from tracer.analysis.ordering import OrderingIndex, Verdict

A, B, C = 7, 13, 14
X = 0x7F00_0000_0000
RW = READ | WRITE
HAZARD_FIXTURES = DATA / "hazards"  # captured by the GPU test programs (scripts/capture_hazard_fixtures.py)
CAPTURES = json.loads((HAZARD_FIXTURES / "captures.json").read_text()) if (HAZARD_FIXTURES / "captures.json").is_file() else {}
# what each program must show (tests/gpu/memory_tables.py EXPECTED, also in captures.json), and the seeds'
SEED_VERDICTS = {"planted_cross_stream": {"RAW", "reuse"}, "event_ordered_dgrad": set()}


def kernel(b: TraceBuilder, stream: int, *accesses: tuple, name: str = "k", exact: int = 1) -> int:
    """One op launching one kernel; accesses are (address, bytes, mode[, allocation])."""
    op = b.op(f"aten::{name}")
    for acc in accesses:
        b.access(op, acc[0], acc[1], acc[2], exact=exact, allocation=acc[3] if len(acc) > 3 else -1)
    return b.launch(stream, name, op=op)


def kinds(h: Hazards) -> list[tuple[str, str, str]]:
    return [(z.kind.value, z.producer.kernel, z.consumer.kernel) for z in h.listed]


def counts(h: Hazards) -> dict[str, int]:
    return dict(h.counts)


class TestAddressRanges:
    def test_no_wait_reader_is_a_raw_hazard(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE), name="producer")
        kernel(b, B, (X, 4096, READ), name="consumer")
        h = hazards(tmp_path, b)
        assert kinds(h) == [("RAW", "producer", "consumer")]
        z = h.listed[0]
        assert (z.address, z.bytes, z.may) == (X, 4096, False)
        assert (z.producer.stream, z.consumer.stream, z.producer.op) == (A, B, "aten::producer")
        assert z.gap_ns == z.consumer.start_ns - z.producer.end_ns

    def test_adjacent_ranges_do_not_overlap(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE))
        kernel(b, B, (X + 4096, 4096, RW))
        kernel(b, C, (X - 16, 16, RW))
        assert counts(hazards(tmp_path, b))["RAW"] == 0 and hazards(tmp_path, b).found == 0

    def test_view_with_a_storage_offset_overlaps_its_base(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 1 << 20, WRITE), name="fill")
        kernel(b, B, (X + 0x1800, 0x100, READ), name="view_read")
        h = hazards(tmp_path, b)
        assert kinds(h) == [("RAW", "fill", "view_read")]
        assert (h.listed[0].address, h.listed[0].bytes) == (X + 0x1800, 0x100)

    def test_partial_overlap_reports_the_shared_bytes(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 0x800, READ), name="reader")
        kernel(b, B, (X + 0x400, 0x800, WRITE), name="writer")
        h = hazards(tmp_path, b)
        assert kinds(h) == [("WAR", "reader", "writer")]
        assert (h.listed[0].address, h.listed[0].bytes) == (X + 0x400, 0x400)

    def test_disjoint_halves_of_one_tensor_are_no_hazard(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 0x1000, WRITE), name="init")
        b.wait(B, b.record(A))
        kernel(b, A, (X, 0x800, WRITE), name="left")
        kernel(b, B, (X + 0x800, 0x800, WRITE), name="right")
        h = hazards(tmp_path, b)
        assert h.found == 0
        assert counts(h)["ordered"] == 1  # right after init: WAW, event-ordered

    def test_read_read_is_never_a_hazard(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, READ))
        kernel(b, B, (X, 4096, READ))
        h = hazards(tmp_path, b)
        assert h.found == 0 and counts(h)["ordered"] == 0

    def test_two_writers_are_waw(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 64, WRITE), name="w1")
        kernel(b, B, (X, 64, WRITE), name="w2")
        assert kinds(hazards(tmp_path, b)) == [("WAW", "w1", "w2")]


class TestOrdering:
    def test_same_stream_is_never_a_hazard(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE))
        kernel(b, A, (X, 4096, READ))
        h = hazards(tmp_path, b)
        assert h.found == 0 and counts(h)["ordered"] == 0  # only pairs on different streams are counted

    def test_event_ordered_pair_is_counted_as_ordered(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE))
        b.wait(B, b.record(A))
        kernel(b, B, (X, 4096, READ))
        h = hazards(tmp_path, b)
        assert h.found == 0 and counts(h)["ordered"] == 1

    def test_record_before_the_producer_does_not_order_it(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        key = b.record(A)
        kernel(b, A, (X, 4096, WRITE), name="producer")
        b.wait(B, key)
        kernel(b, B, (X, 4096, READ), name="consumer")
        assert kinds(hazards(tmp_path, b)) == [("RAW", "producer", "consumer")]

    @pytest.mark.parametrize("sync", ["stream", "device", "event"])
    def test_host_synchronized_pair_is_counted_as_ordered(self, tmp_path: Path, sync: str) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE))
        if sync == "stream":
            b.stream_sync(A)
        elif sync == "device":
            b.device_sync()
        else:
            b.event_sync(b.record(A))
        kernel(b, B, (X, 4096, READ))
        h = hazards(tmp_path, b)
        assert h.found == 0 and counts(h)["ordered"] == 1

    def test_sync_of_another_stream_does_not_order(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE))
        b.stream_sync(C)
        kernel(b, B, (X, 4096, READ))
        assert counts(hazards(tmp_path, b))["RAW"] == 1

    def test_ordering_is_transitive_along_the_consumer_stream(self, tmp_path: Path) -> None:
        """B waits once; a later kernel on B is ordered after A's producer through stream order."""
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE))
        b.wait(B, b.record(A))
        kernel(b, B, (X + 8192, 64, READ))
        kernel(b, B, (X, 4096, READ))
        assert hazards(tmp_path, b).found == 0


class TestReuse:
    def _freed_and_reused(self, b: TraceBuilder, record_stream: bool) -> None:
        """A block allocated on A and used on B; freed, then reused by A (PyTorch's caching allocator)."""
        first = b.alloc(X, 4096, A, label="aten::empty at train.py:10")
        kernel(b, A, (X, 4096, WRITE, first), name="fill")
        b.wait(B, b.record(A))
        kernel(b, B, (X, 4096, READ, first), name="side_read")
        key = b.record(B) if record_stream else 0
        b.free_alloc(first)
        if record_stream:
            b.query_event(key)  # the allocator saw the side stream's use complete before reusing the block
        second = b.alloc(X, 4096, A, label="aten::empty at train.py:20")
        kernel(b, A, (X, 4096, WRITE, second), name="overwrite")

    def test_reuse_without_record_stream_is_a_hazard(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        self._freed_and_reused(b, record_stream=False)
        h = hazards(tmp_path, b)
        assert kinds(h) == [("reuse", "side_read", "overwrite")]
        z = h.listed[0]
        assert z.allocation is not None and z.allocation.label == "aten::empty at train.py:20"
        assert z.previous_allocation is not None and z.previous_allocation.label == "aten::empty at train.py:10"
        assert z.to_json()["memory"]["allocation"]["stream"] == A

    def test_record_stream_query_orders_the_reuse(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        self._freed_and_reused(b, record_stream=True)
        trace = load(tmp_path, b)
        h = analyze(trace).hazards
        assert h is not None and h.found == 0 and counts(h)["ordered"] == 2 and h.host_queries == 1
        assert h.unmatched_queries == 0

    def test_stream_query_orders_like_a_stream_sync(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, B, (X, 4096, READ))
        b.query_stream(B)
        kernel(b, A, (X, 4096, WRITE))
        assert hazards(tmp_path, b).found == 0


class TestMay:
    def test_a_guessed_access_makes_the_hazard_may(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE))
        kernel(b, B, (X, 4096, RW), exact=0)
        h = hazards(tmp_path, b)
        assert [(z.kind.value, z.may) for z in h.listed] == [("RAW", True)] and counts(h)["may"] == 1

    def test_one_exact_access_pair_makes_it_certain(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE), (X + 8192, 64, WRITE))
        op = b.op("aten::mixed")
        b.access(op, X, 4096, READ, exact=1)
        b.access(op, X + 8192, 64, READ, exact=0)
        b.launch(B, "mixed", op=op)
        h = hazards(tmp_path, b)
        assert [(z.kind.value, z.may) for z in h.listed] == [("RAW", False)] and counts(h)["may"] == 0


class TestKernelsWithoutMemory:
    def test_unknown_launches_are_counted_listed_and_fail_the_check(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE))
        corr = b.launch(B, "triton_kernel")
        b.launch_unknown(corr, "triton_kernel", "cuFuncGetParamInfo unavailable")
        a = analyze(load(tmp_path, b))
        h = a.hazards
        assert h is not None and (h.kernels_with_memory, h.kernels_without_memory, h.unjudged) == (1, 1, 1)
        assert h.launch_unknown == (("triton_kernel", 1, "cuFuncGetParamInfo unavailable"),)
        assert a.failures(False, True) == ["not judged: 1 of 2 kernel operation(s): no memory access set (launched outside any "
                                           "recorded op, arguments not read); hazards unknown for them"]

    def test_decoded_launch_arguments_join_on_the_launch_call(self, tmp_path: Path) -> None:
        """Kind 3 ops (no external correlation): TRACER_OPS.correlationId is the launch call."""
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE), name="producer")
        corr = b.launch(B, "extension_kernel")
        op = b.op("launch arguments", kind=3, corr=corr)
        b.access(op, X, 8, RW, exact=0)
        h = hazards(tmp_path, b)
        assert kinds(h) == [("RAW", "producer", "extension_kernel")] and h.listed[0].may
        assert h.kernels_without_memory == 0

    def test_kernels_of_one_op_share_its_set(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE), name="producer")
        op = b.op("aten::linear")
        b.access(op, X, 4096, READ)
        b.launch(B, "gemm", op=op)
        b.launch(B, "bias", op=op)
        assert kinds(hazards(tmp_path, b)) == [("RAW", "producer", "gemm"), ("RAW", "producer", "bias")]


class TestGraphReplays:
    """Kernels replayed from a CUDA graph carry the graph launch's correlation id and a node id of the
    instantiated graph; the clone leads to the node a launch made at capture, and so to its op."""

    @staticmethod
    def captured(b: TraceBuilder, mode: int = WRITE) -> list[tuple[str, int]]:
        """aten::mul writing X captured as node 1 (cloned as 101 at instantiation), and a node 2
        (cloned as 102) made with no traced launch; returns the replayed kernels."""
        op = b.op("aten::mul")
        b.access(op, X, 4096, mode)
        b.capture_launch("mul", 1, op=op)
        b.tables["TRACER_GRAPH_NODES"].append((2, -1, -1))
        b.clone_nodes({101: 1, 102: 2})
        return [("mul", 101)]

    def test_a_replayed_kernel_gets_the_access_set_of_the_launch_that_made_its_node(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        replayed = self.captured(b)
        b.graph_launch(A, replayed)
        kernel(b, B, (X, 4096, READ), name="consumer")
        h = hazards(tmp_path, b)
        assert kinds(h) == [("RAW", "mul", "consumer")] and not h.listed[0].may
        assert h.listed[0].producer.op == "aten::mul"
        assert (h.kernels_without_memory, h.graph_kernels) == (0, (1, 0))
        assert analyze(load(tmp_path, b)).to_json()["hazards"]["graph_kernels"] == {"replayed": 1, "without_memory": 0}
        assert any(line.startswith("note: 1 operation(s) replayed from CUDA graphs") for line in h.text_lines())

    def test_an_event_after_the_graph_launch_orders_its_kernels(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        replayed = self.captured(b)
        b.graph_launch(A, replayed * 2)  # two replays: both kernels share the launch's correlation id
        b.wait(B, b.record(A))
        kernel(b, B, (X, 4096, READ), name="consumer")
        h = hazards(tmp_path, b)
        assert h.found == 0 and counts(h)["ordered"] >= 1

    def test_a_node_no_traced_launch_made_leaves_its_kernels_unjudged(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        self.captured(b)
        b.graph_launch(A, [("built_node", 102), ("unknown_node", 999)])
        kernel(b, B, (X, 4096, READ), name="consumer")
        a = analyze(load(tmp_path, b))
        h = a.hazards
        assert h is not None and h.found == 0 and (h.kernels_without_memory, h.unjudged, h.graph_kernels) == (2, 2, (2, 2))
        assert a.failures(False, True) == ["not judged: 2 of 3 kernel operation(s): no memory access set (launched outside any "
                                           "recorded op, arguments not read); hazards unknown for them"]
        assert any("(2 kernel(s) replayed from CUDA graphs have none" in line for line in h.text_lines())


def test_graph_nodes_follow_clones_to_the_launch_that_made_them() -> None:
    node = np.array([1, 2, 101, 201, 102, 7, 8], dtype=np.int64)
    corr = np.array([40, -1, -1, -1, -1, -1, -1], dtype=np.int64)
    original = np.array([-1, -1, 1, 101, 2, 8, 7], dtype=np.int64)  # 201 -> 101 -> 1; 7 <-> 8 a cycle
    g = graph_nodes(node, corr, original)
    assert dict(zip(g.node.tolist(), g.corr.tolist())) == {1: 40, 2: -1, 7: -1, 8: -1, 101: 40, 102: -1, 201: 40}
    chain = np.arange(1000, 1000 + MAX_CLONE_DEPTH + 2, dtype=np.int64)  # each cloned from the one before
    g = graph_nodes(chain, np.r_[41, np.full(len(chain) - 1, -1)], np.r_[-1, chain[:-1]])
    assert g.corr[:MAX_CLONE_DEPTH + 1].tolist() == [41] * (MAX_CLONE_DEPTH + 1) and g.corr[-1] == -1  # too deep: unknown


class TestNoMemoryTables:
    def test_trace_without_tables_says_so_and_pairs_all_warns(self, capsys: pytest.CaptureFixture[str]) -> None:
        from tracer.cli import main

        src = DATA / "traces" / "planted_cross_stream.sqlite"
        a = analyze(load_trace(src), None, all_kernel_pairs=True)
        assert a.hazards is not None and a.to_json()["hazards"]["memory"] is False
        assert any("cannot tell races from independent work" in n for n in a.notes)
        assert main(["trace", "analyze", str(src)]) == 0
        out = capsys.readouterr().out
        assert "hazards: the trace has no memory access sets" in out and "note: --pairs all" in out
        assert main(["trace", "analyze", str(src), "--fail-on-hazard"]) == 1
        assert "hazards cannot be checked" in capsys.readouterr().err
        assert main(["trace", "analyze", str(src), "--fail-on-hazard", "--no-hazards"]) == 2

    def test_memory_trace_judges_hazards_instead_of_all_pairs_by_default(self, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
        from tracer.cli import main

        b = TraceBuilder()
        kernel(b, A, (X, 4096, WRITE), name="producer")
        kernel(b, B, (X, 4096, READ), name="consumer")
        path = b.write(tmp_path / "t.sqlite", memory=True)
        assert main(["trace", "analyze", str(path), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["pair_spec"]["mode"] == "none" and out["hazards"]["counts"]["RAW"] == 1
        assert out["hazards"]["listed"][0]["producer"]["kernel"] == "producer"
        assert main(["trace", "analyze", str(path), "--fail-on-hazard"]) == 1
        assert "1 cross-stream memory hazard(s)" in capsys.readouterr().err
        assert main(["trace", "analyze", str(path), "--pairs", "all", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["pair_counts"]["unordered"] == 1


def reference(trace: Trace) -> set[tuple[int, int, str]]:
    """Every conflicting access pair on different streams, judged pair by pair with order()."""
    attr = attribute(trace)
    index = OrderingIndex(trace, attr.launch_tid, attr.launch_start)
    memory = trace.memory
    assert memory is not None
    ka, la, k = kernel_accesses(memory, trace.kernels.corr), memory.launches, trace.kernels
    out = set()
    for i in range(len(ka.kernel)):
        for j in range(len(ka.kernel)):
            p, c, rp, rc = int(ka.kernel[i]), int(ka.kernel[j]), int(ka.row[i]), int(ka.row[j])
            if k.stream[p] == k.stream[c] or k.corr[p] >= k.corr[c]:
                continue
            if not (la.address[rp] < la.address[rc] + la.size[rc] and la.address[rc] < la.address[rp] + la.size[rp]):
                continue
            if not ((la.mode[rp] | la.mode[rc]) & WRITE) or index.order(p, c).verdict is not Verdict.UNORDERED:
                continue
            pa, ca = la.allocation[rp], la.allocation[rc]
            kind = ("reuse" if pa >= 0 and ca >= 0 and pa != ca else "RAW" if la.mode[rp] & WRITE and la.mode[rc] & READ
                    else "WAR" if la.mode[rp] & READ and la.mode[rc] & WRITE else "WAW")
            out.add((int(k.corr[p]), int(k.corr[c]), kind))
    return out


def random_trace(seed: int) -> TraceBuilder:
    rnd = random.Random(seed)
    b = TraceBuilder()
    streams = (A, B, C)
    buffers = [(X + rnd.randrange(0, 64) * 256, rnd.choice((256, 512, 2048)), n + 1) for n in range(6)]
    keys: list[int] = []
    for _ in range(rnd.randrange(30, 70)):
        r = rnd.random()
        if r < 0.12:
            keys.append(b.record(rnd.choice(streams)))
        elif r < 0.22 and keys:
            b.wait(rnd.choice(streams), rnd.choice(keys))
        elif r < 0.25:
            b.stream_sync(rnd.choice(streams))
        elif r < 0.27 and keys:
            b.query_event(rnd.choice(keys))
        else:
            accesses = []
            for _ in range(rnd.randrange(1, 3)):
                addr, size, alloc = rnd.choice(buffers)
                off = rnd.randrange(0, size // 2)
                accesses.append((addr + off, rnd.randrange(1, size - off + 1), rnd.choice((READ, READ, WRITE, RW)), alloc))
            kernel(b, rnd.choice(streams), *accesses)
    return b


@pytest.mark.parametrize("seed", range(16))
def test_bulk_search_matches_pair_by_pair_reference(tmp_path: Path, seed: int) -> None:
    trace = load(tmp_path, random_trace(seed))
    expected = reference(trace)
    h = analyze(trace).hazards
    assert h is not None
    got = {(z.producer.corr, z.consumer.corr, z.kind.value) for z in h.listed}
    assert h.found == len(expected) and got <= expected and len(got) == min(len(expected), MAX_LISTED_HAZARDS)
    assert expected, "a random trace with no hazard tests nothing"


def test_hazards_json_contract(tmp_path: Path) -> None:
    b = TraceBuilder()
    kernel(b, A, (X, 4096, WRITE), name="producer")
    kernel(b, B, (X, 4096, READ), name="consumer")
    out = analyze(load(tmp_path, b)).to_json()["hazards"]
    assert set(out) >= {"memory", "kernels_with_memory", "kernels_without_memory", "launch_unknown", "counts", "listed"}
    assert set(out["counts"]) == {"RAW", "WAR", "WAW", "reuse", "may", "ordered"}
    z = out["listed"][0]
    assert set(z) == {"kind", "may", "gap_ns", "producer", "consumer", "memory"}
    assert set(z["producer"]) >= {"kernel", "range", "stream", "corr", "op", "start_ns", "end_ns", "rule"}
    assert set(z["memory"]) >= {"address", "bytes", "allocation"}


@pytest.mark.skipif(not list(HAZARD_FIXTURES.glob("*.sqlite")), reason="no captured hazard fixtures yet "
                    "(tests/data/hazards/, made by the GPU test programs on the lead's GPU run)")
def test_captured_fixtures_have_memory_tables() -> None:
    files = sorted(HAZARD_FIXTURES.glob("*.sqlite"))
    assert files
    for f in files:
        t = load_trace(f)
        assert t.memory is not None and t.memory.recorded, f.name
        assert int(np.sum(kernel_accesses(t.memory, t.kernels.corr).kernels_with_memory)) > 0, f.name


def fixture_hazards(program: str) -> Hazards:
    h = analyze(load_trace(HAZARD_FIXTURES / f"{program}.sqlite")).hazards
    assert h is not None and h.memory and h.kernels_without_memory == 0, program
    return h


@pytest.mark.parametrize("program", sorted(p for p, entry in CAPTURES.items() if isinstance(entry.get("expected"), list)))
def test_each_captured_program_gets_its_verdict(program: str) -> None:
    """RAW for the readers without a wait (cuda.core and Triton: `may`, their direction guessed from
    the launch's pointers), WAR, WAW (also two overlapping in-place views), reuse without
    record_stream; none where an event, a host sync, one stream or record_stream orders the
    accesses, or the in-place views are disjoint."""
    entry, h = CAPTURES[program], fixture_hazards(program)
    assert {z.kind.value for z in h.listed} == set(entry["expected"]), kinds(h)
    assert h.found == len(h.listed) and all(z.may is entry["may"] for z in h.listed)
    if not entry["expected"]:
        assert dict(h.counts)["ordered"] > 0  # the overlap is there, and ordered


@pytest.mark.parametrize("seed", sorted(SEED_VERDICTS))
def test_seed_captures_get_their_verdict(seed: str) -> None:
    """The planted cross-stream race: cast_transpose's output read by the dgrad GEMM on the side
    stream with no wait (besides it, the same missing wait leaves dgrad unordered with everything
    else the main stream wrote before it, reused memory included); its event-ordered twin: none."""
    h = fixture_hazards(seed)
    assert {z.kind.value for z in h.listed} == SEED_VERDICTS[seed] and not any(z.may for z in h.listed)
    planted = [z for z in h.listed if z.kind.value == "RAW" and z.producer.kernel == "cast_transpose"
               and z.producer.range.endswith("/cast_transpose") and z.consumer.range.endswith("/dgrad")]
    assert bool(planted) is (seed == "planted_cross_stream")
    assert all(z.consumer.range.endswith("/dgrad") for z in h.listed)  # every hazard is the side stream's GEMM
