"""Issue #26 on CPU: copies and memsets are operations of the model (stream order, happens-before,
pairs, hazards), CUDA graph launches are ordered on their launch stream and their branches judged
with the graph's edges, and whatever is not judged is counted, named and fails --fail-on-hazard.
Synthetic traces here (scripts/make_synthetic_trace.py's builder); the captured programs are in
tests/test_ops_fixtures.py."""
from __future__ import annotations

import ctypes
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tests.trace_synthetic import TraceBuilder, hazards, load
from tracer.capture.callbacks import copy_accesses, pitched
from tracer.analysis.analyze import analyze
from tracer.analysis.hazards import Covered, Hazards
from tracer.readers.load import load_trace
from tracer.readers.memory_reader import READ, WRITE
from tracer.model.trace import MEMCPY, MEMSET, with_operations
from tracer.analysis.ordering import Verdict
from tracer.analysis.pairs import PairSpec

A, B, C = 7, 13, 14
X = 0x7F00_0000_0000


def op_with(b: TraceBuilder, name: str, *accesses: tuple[int, int, int]) -> int:
    op = b.op(name)
    for address, size, mode in accesses:
        b.access(op, address, size, mode)
    return op


def coverage(h: Hazards) -> dict[str, tuple[int, int, int]]:
    return {c.kind.value: (c.seen, c.judged, c.unjudged) for c in h.coverage}


class TestCopies:
    def test_a_copy_in_a_torch_op_races_like_a_kernel(self, tmp_path: Path) -> None:
        """dst.copy_(pinned, non_blocking=True) on a side stream, dst * 3 on main with no wait: RAW."""
        b = TraceBuilder()
        b.push("h2d")
        b.copy(B, 4096, kind=1, op=op_with(b, "aten::copy_", (X, 4096, WRITE), (0x1000_0000, 4096, READ)))
        b.pop()
        b.push("use")
        b.launch(A, "mul", op=op_with(b, "aten::mul", (X, 4096, READ)))
        b.pop()
        h = hazards(tmp_path, b)
        assert [(z.kind.value, z.producer.kernel, z.consumer.kernel) for z in h.listed] == [("RAW", "[memcpy HtoD]", "mul")]
        assert h.listed[0].producer.op == "aten::copy_" and h.not_judged == ()
        assert coverage(h)["memcpy"] == (1, 1, 0)
        assert h.text_lines()[0].endswith("judged 2 of 2 GPU operations (kernel 1/1, memcpy 1/1)")

    def test_a_wait_orders_a_copy_and_a_memset_writer_races(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        b.copy(B, 4096, kind=1, op=op_with(b, "aten::copy_", (X, 4096, WRITE)))
        b.wait(A, b.record(B))
        b.launch(A, "mul", op=op_with(b, "aten::mul", (X, 4096, READ)))
        b.copy(C, 4096, memset=True, op=op_with(b, "aten::zero_", (X, 4096, WRITE)))  # WAR against mul, WAW against the copy
        h = hazards(tmp_path, b)
        assert {z.kind.value for z in h.listed} == {"WAR", "WAW"}
        assert dict(h.counts)["ordered"] == 1 and coverage(h)["memset"] == (1, 1, 0)
        assert {z.consumer.kernel for z in h.listed} == {"[memset]"}

    def test_a_copy_without_a_memory_set_is_not_judged_and_fails_the_check(self, tmp_path: Path) -> None:
        """A copy record with no op and no API arguments on a device with two streams: never clean."""
        b = TraceBuilder()
        b.launch(A, "writer", op=op_with(b, "aten::fill_", (X, 4096, WRITE)))
        b.copy(B, 4096, kind=8)
        a = analyze(load(tmp_path, b))
        h = a.hazards
        assert h is not None and h.found == 0 and coverage(h)["memcpy"] == (1, 0, 1)
        line = ("not judged: 1 of 1 memcpy operation(s): no memory access set (no torch op issued them and no copy API "
                "arguments were recorded, or a side is a CUDA array: opaque layout, not linear memory); hazards unknown for them")
        assert a.failures(False, True) == [line]
        assert f"warning: {line}" in h.text_lines()
        assert h.text_lines()[0].startswith("hazards: 0 (") and "memcpy 0/1" in h.text_lines()[0]
        assert a.to_json()["hazards"]["not_judged"] == [line]

    def test_on_a_one_stream_device_an_unjudged_copy_cannot_race(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        b.launch(A, "writer", op=op_with(b, "aten::fill_", (X, 4096, WRITE)))
        b.copy(A, 4096, kind=2)
        a = analyze(load(tmp_path, b))
        assert a.hazards is not None and coverage(a.hazards)["memcpy"] == (1, 0, 0) and a.failures(False, True) == []

    def test_copy_api_arguments_give_a_copy_its_bytes(self, tmp_path: Path) -> None:
        """A cuMemcpyDtoDAsync outside any op: TRACER_OPS kind 4 with the call's correlation id."""
        b = TraceBuilder()
        b.launch(A, "writer", op=op_with(b, "aten::fill_", (X, 4096, WRITE)))
        corr = b.copy(B, 4096, kind=8, api="cuMemcpyDtoDAsync")
        op = b.op("cuMemcpyDtoDAsync", kind=4, corr=corr)
        b.access(op, X, 4096, READ)
        b.access(op, X + (1 << 20), 4096, WRITE)
        h = hazards(tmp_path, b)
        assert [(z.kind.value, z.consumer.kernel, z.consumer.op) for z in h.listed] == [
            ("RAW", "[memcpy DtoD]", "cuMemcpyDtoDAsync")]

    def test_pairs_see_copies_and_say_which_kind_each_side_is(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        for it in range(2):
            b.push(f"it{it}/h2d")
            b.copy(B, 4096, kind=1)
            b.pop()
            if it:
                b.wait(A, b.record(B))
            b.push(f"it{it}/use_h2d")
            b.launch(A, "mul")
            b.pop()
            b.device_sync()
        a = analyze(load_trace(b.write(tmp_path / "t.sqlite")), PairSpec.of([("it*/h2d", "it*/use_h2d")]))
        assert [(p.verdict, p.producer_op, p.consumer_op) for p in a.pairs] == [
            (Verdict.UNORDERED, "memcpy", "kernel"), (Verdict.EVENT_ORDERED, "memcpy", "kernel")]
        assert a.to_json()["pairs"][0]["producer_op"] == "memcpy"

    def test_the_model_merges_operations_in_start_order(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        b.launch(A, "k1")
        b.copy(A, 64, kind=2)
        b.copy(A, 64, memset=True)
        b.launch(A, "k2")
        t = with_operations(load_trace(b.write(tmp_path / "t.sqlite")))
        assert t.kernels.op.tolist() == [0, MEMCPY, MEMSET, 0]
        assert [t.kernel_name(i) for i in range(4)] == ["k1", "[memcpy DtoH]", "[memset]", "k2"]
        assert (np.diff(t.kernels.start) >= 0).all() and with_operations(t) is t


class TestGraphLaunches:
    """A graph launch whose branches CUPTI put on streams of their own (A: the fill, C: the sum),
    launched on A twice."""

    @staticmethod
    def graph(b: TraceBuilder, *, edges: list[tuple[int, int]] | None, record_stream: bool = True, replays: int = 2) -> None:
        fill = op_with(b, "aten::fill_", (X, 4096, WRITE))
        b.capture_launch("fill", 1, op=fill)
        total = op_with(b, "aten::sum", (X, 4096, READ), (X + (1 << 20), 4, WRITE))
        b.capture_launch("sum", 2, op=total)
        b.clone_nodes({101: 1, 102: 2})
        if edges is not None:
            b.graph_edges([1, 2], edges)
        for r in range(replays):
            b.push(f"replay{r}")
            b.graph_launch(A, [("fill", 101, A), ("sum", 102, C)], record_stream=record_stream)
            b.pop()

    def test_without_edges_replays_are_ordered_and_branches_counted_not_judged(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        self.graph(b, edges=None)
        a = analyze(load(tmp_path, b))
        h = a.hazards
        assert h is not None and h.found == 0  # nothing between replays: they run one after another on A
        assert coverage(h)["graph-internal"] == (4, 0, 4)
        assert any("graph-internal" in f for f in a.failures(False, True))
        assert a.to_json()["graph_launches"] == {"launches": 2, "operations": 4, "branched": 2, "stream_recorded": 2}
        assert not [line for line in a.report_lines() if "first operation" in line]

    def test_a_launch_whose_stream_was_not_recorded_says_so(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        self.graph(b, edges=[(1, 2)], record_stream=False)
        a = analyze(load(tmp_path, b))
        assert a.graphs.stream_recorded == 0 and a.hazards is not None and a.hazards.found == 0
        assert [line for line in a.report_lines() if "2 CUDA graph launch(es) ordered on the stream of their first" in line]

    def test_two_branches_with_no_edge_race_once_per_replay(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        self.graph(b, edges=[], replays=3)
        a = analyze(load(tmp_path, b))
        h = a.hazards
        assert h is not None and dict(h.counts)["RAW"] == 3 and h.found == 3
        assert sorted((z.producer.range, z.consumer.range, z.producer.kernel, z.consumer.kernel) for z in h.listed) == [
            (f"replay{r}", f"replay{r}", "fill", "sum") for r in range(3)]
        assert coverage(h)["graph-internal"] == (6, 6, 0) and a.failures(False, True) == ["3 cross-stream memory hazard(s)"]

    def test_a_launch_past_the_pairwise_limit_is_counted_not_judged(self, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
        import tracer.analysis.graphs as graphs

        monkeypatch.setattr(graphs, "MAX_JUDGED_OPS", 1)
        b = TraceBuilder()
        self.graph(b, edges=[])
        a = analyze(load(tmp_path, b))
        assert a.hazards is not None and a.hazards.found == 0 and coverage(a.hazards)["graph-internal"] == (4, 0, 4)

    def test_an_edge_orders_the_branches(self, tmp_path: Path) -> None:
        b = TraceBuilder()
        self.graph(b, edges=[(1, 2)])
        a = analyze(load(tmp_path, b))
        assert a.hazards is not None and a.hazards.found == 0 and a.failures(False, True) == []

    def test_a_launch_is_ordered_on_the_stream_it_was_launched_on(self, tmp_path: Path) -> None:
        """Launched on B (recorded), its operations reported on A and C: a wait B -> main orders them."""
        b = TraceBuilder()
        fill = op_with(b, "aten::fill_", (X, 4096, WRITE))
        b.capture_launch("fill", 1, op=fill)
        b.clone_nodes({101: 1})
        b.graph_launch(B, [("fill", 101, A)], record_stream=True)
        b.wait(C, b.record(B))
        b.launch(C, "reader", op=op_with(b, "aten::mul", (X, 4096, READ)))
        b.launch(A, "late_reader", op=op_with(b, "aten::mul", (X, 4096, READ)))  # A waited for nothing
        h = hazards(tmp_path, b)
        assert [(z.producer.kernel, z.consumer.kernel, z.producer.stream) for z in h.listed] == [("fill", "late_reader", B)]


class TestKineto:
    def test_gpu_memcpy_and_memset_events_are_operations(self, tmp_path: Path) -> None:
        events = [
            {"ph": "X", "cat": "kernel", "name": "k", "ts": 10, "dur": 5,
             "args": {"device": 0, "stream": 7, "correlation": 5}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": 1, "dur": 2,
             "args": {"device": 0, "stream": 13, "correlation": 3, "bytes": 4096}},
            {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 20, "dur": 1,
             "args": {"device": 0, "stream": 7, "correlation": 9, "bytes": 64}},
        ]
        path = tmp_path / "t.json.gz"
        with gzip.open(path, "wt") as fh:
            json.dump({"traceEvents": events}, fh)
        t = load_trace(path)
        x = t.transfers
        assert x is not None and (t.memcpy_count, t.memset_count) == (1, 1)
        assert (x.op.tolist(), x.copy_kind.tolist(), x.bytes.tolist(), x.stream.tolist()) == ([MEMCPY, MEMSET], [1, 0],
                                                                                             [4096, 64], [13, 7])
        a = analyze(t)
        assert a.to_json()["operations"] == {"kernel": 1, "memcpy": 1, "memset": 1}
        assert [(s.stream, s.kernels, s.operations) for s in a.streams] == [(7, 1, 2), (13, 0, 1)]


class TestCopyApiArguments:
    """The params structs of copy and memset API calls as the CUPTI callback sees them."""

    @staticmethod
    def at(words: list[int]) -> tuple[int, object]:
        buf = (ctypes.c_uint64 * len(words))(*words)
        return ctypes.addressof(buf), buf

    def test_1d_peer_and_memset(self) -> None:
        p, keep = self.at([0xD000, 0x5000, 4096, 1, 0])  # cudaMemcpyAsync(dst, src, count, kind, stream)
        assert copy_accesses("cudaMemcpyAsync", p) == [(0x5000, 4096, READ, 1, "src"), (0xD000, 4096, WRITE, 1, "dst")]
        p, keep = self.at([0xD000, 0xC1, 0x5000, 0xC2, 512, 0])  # cuMemcpyPeerAsync(dst, dstCtx, src, srcCtx, n, s)
        assert copy_accesses("cuMemcpyPeerAsync", p) == [(0x5000, 512, READ, 1, "src"), (0xD000, 512, WRITE, 1, "dst")]
        p, keep = self.at([0xD000, 7, 100, 0])  # cuMemsetD32Async(dst, value, N, stream): N elements
        assert copy_accesses("cuMemsetD32Async", p) == [(0xD000, 400, WRITE, 1, "dst")]
        del keep

    def test_pitched_2d_copies(self) -> None:
        p, keep = self.at([0xD000, 4096, 0x5000, 2048, 1024, 16, 3, 0])  # cudaMemcpy2DAsync
        assert copy_accesses("cudaMemcpy2DAsync", p) == [(0x5000, 2048 * 15 + 1024, READ, 0, "src"),
                                                         (0xD000, 4096 * 15 + 1024, WRITE, 0, "dst")]
        # CUDA_MEMCPY2D: src x, y, type (2 device), host, device, array, pitch; dst the same; width, height
        c, keep2 = self.at([8, 2, 2, 0, 0x5000, 0, 256, 0, 0, 1, 0xA000, 0, 0, 64, 64, 3])
        p, keep3 = self.at([c, 0])
        assert copy_accesses("cuMemcpy2DAsync", p) == [(0x5000 + 2 * 256 + 8, 256 * 2 + 64, READ, 0, "src"),
                                                       (0xA000, 64 * 3, WRITE, 1, "dst")]  # host dst, rows contiguous
        assert pitched(0x10, 64, 64, 4, WRITE, "dst") == (0x10, 256, WRITE, 1, "dst")
        del keep, keep2, keep3

    def test_pitched_3d_copies_runtime_and_driver(self) -> None:
        # cudaMemcpy3DParms: srcArray, srcPos (x, y, z), srcPtr (ptr, pitch, xsize, ysize), dstArray, dstPos,
        # dstPtr, extent (width bytes, height, depth), kind: 4 slices of 8 rows of 100 bytes, from position
        # (4, 1, 2) of a 256-byte pitched, 16-row volume into a contiguous one
        parms, keep = self.at([0, 4, 1, 2, 0x100000, 256, 256, 16, 0, 0, 0, 0, 0xA00000, 100, 100, 8, 100, 8, 4, 3])
        p, keep2 = self.at([parms, 0])
        src = 0x100000 + (2 * 16 + 1) * 256 + 4
        assert copy_accesses("cudaMemcpy3DAsync", p) == [(src, 256 * 16 * 3 + 256 * 7 + 100, READ, 0, "src"),
                                                         (0xA00000, 100 * 8 * 4, WRITE, 1, "dst")]
        # CUDA_MEMCPY3D: per side x, y, z, lod, type (2 device, 1 host), host, device, array, reserved,
        # pitch, height; then WidthInBytes, Height, Depth: device -> host, 2 slices of 3 rows of 64 bytes
        side = lambda x, y, z, kind, host, dev, pitch, rows: [x, y, z, 0, kind, host, dev, 0, 0, pitch, rows]
        c, keep3 = self.at(side(0, 0, 1, 2, 0, 0x5000, 128, 4) + side(0, 0, 0, 1, 0xB000, 0, 64, 3) + [64, 3, 2])
        p, keep4 = self.at([c, 0])
        assert copy_accesses("cuMemcpy3DAsync", p) == [(0x5000 + 4 * 128, 128 * 4 + 128 * 2 + 64, READ, 0, "src"),
                                                       (0xB000, 64 * 3 * 2, WRITE, 1, "dst")]
        assert copy_accesses("cuMemcpy3DPeerAsync", p) == copy_accesses("cuMemcpy3DAsync", p)  # same offsets
        del keep, keep2, keep3, keep4

    def test_cuda_array_copies_are_not_judged(self) -> None:
        """An array side has no linear byte range: the copy is reported as undecoded, never half-judged."""
        side = lambda kind, dev, array: [0, 0, 0, 0, kind, 0, dev, array, 0, 64, 4]
        c, keep = self.at(side(3, 0, 0xAA) + side(2, 0x5000, 0) + [64, 4, 2])
        p, keep2 = self.at([c, 0])
        assert copy_accesses("cuMemcpy3DAsync", p) is None
        parms, keep3 = self.at([0xAA] + [0] * 19)  # cudaMemcpy3DParms with a srcArray
        p3, keep4 = self.at([parms, 0])
        assert copy_accesses("cudaMemcpy3D", p3) is None
        assert copy_accesses("cudaMemcpy2DToArrayAsync", p3) is None
        c2d, keep5 = self.at([0, 0, 3, 0, 0, 0xAA, 0, 0, 0, 2, 0, 0x5000, 0, 256, 64, 3])  # CUDA_MEMCPY2D from an array
        p2, keep6 = self.at([c2d, 0])
        assert copy_accesses("cuMemcpy2DAsync", p2) is None
        del keep, keep2, keep3, keep4, keep5, keep6


def test_covered_kinds_are_the_issue_list() -> None:
    assert [c.value for c in Covered] == ["kernel", "memcpy", "memset", "collective", "graph-internal", "undecoded-launch", "outside-window"]


def test_a_copy_across_two_allocations_races_with_writers_of_both(tmp_path: Path) -> None:
    """A copy's source range crossing from one allocation into the next (synthetic: the captured
    family has none) is compared byte for byte: it races with a writer of each."""
    b = TraceBuilder()
    first, second = b.alloc(X, 4096), b.alloc(X + 4096, 4096)
    op = b.op("aten::fill_")
    b.access(op, X, 4096, WRITE, allocation=first)
    b.launch(A, "fill_first", op=op)
    op = b.op("aten::fill_")
    b.access(op, X + 4096, 4096, WRITE, allocation=second)
    b.launch(A, "fill_second", op=op)
    corr = b.copy(B, 4096, kind=8, api="cuMemcpyDtoDAsync")
    op = b.op("cuMemcpyDtoDAsync", kind=4, corr=corr)
    b.access(op, X + 2048, 4096, READ, allocation=first)
    h = hazards(tmp_path, b)
    assert sorted((z.kind.value, z.producer.kernel, z.bytes) for z in h.listed) == [
        ("RAW", "fill_first", 2048), ("RAW", "fill_second", 2048)]


def test_the_report_shows_what_was_judged_and_what_was_not(tmp_path: Path) -> None:
    from tracer.cli import main

    b = TraceBuilder()
    b.launch(A, "writer", op=op_with(b, "aten::fill_", (X, 4096, WRITE)))
    b.copy(B, 4096, kind=8)
    trace = b.write(tmp_path / "t.sqlite", memory=True)
    run = tmp_path / "run"
    assert main(["trace", "import", str(trace), "-o", str(run)]) == 0
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "judged 1 of 2 GPU operations (kernel 1/1, memcpy 0/1)" in html
    assert "not judged: 1 of 1 memcpy operation(s)" in html


class TestCopyCallbacks:
    """The callback path: a runtime copy and its nested driver call recorded once as a kind 4 op, a
    copy inside a torch op left to the op, a graph launch's stream recorded."""

    @staticmethod
    def callbacks():
        import enum

        from tests.test_capture_memory import FakeCupti, Recording
        from tracer.capture.callbacks import ApiCallbacks

        class Cupti(FakeCupti):
            driver_api_trace_cbid = enum.IntEnum("driver_api_trace_cbid", {
                **{m.name: m.value for m in FakeCupti.driver_api_trace_cbid},
                "cuMemcpyDtoDAsync_v2": 700, "cuGraphLaunch": 701, "cuMemsetD32Async": 702})
            runtime_api_trace_cbid = enum.IntEnum("runtime_api_trace_cbid", {
                **{m.name: m.value for m in FakeCupti.runtime_api_trace_cbid}, "cudaMemcpyAsync_v3020": 41})

        rec = Recording().rec
        cupti = Cupti()
        calls = ApiCallbacks(cupti, rec, roles=("launch",))
        calls.subscribe()
        return rec, cupti, calls

    @staticmethod
    def cbdata(words: list[int], corr: int, site: int = 0) -> tuple[object, list[object]]:
        from types import SimpleNamespace

        from tests.test_capture_memory import CallbackData

        params = (ctypes.c_uint64 * len(words))(*words)
        data = CallbackData(site, 0, ctypes.addressof(params), 0)
        return SimpleNamespace(callback_site=site, ptr=ctypes.addressof(data), correlation_id=corr, symbol_name=None,
                               context=0), [params, data]

    def test_a_runtime_copy_and_its_driver_call_are_one_op(self) -> None:
        rec, cupti, calls = self.callbacks()
        assert {(1, 700), (1, 701), (1, 702), (2, 41)} <= set(cupti.enabled)
        cb, keep = self.cbdata([0xD000, 0x5000, 4096, 3, 0], corr=90)
        calls.callback(None, 2, 41, cb)  # cudaMemcpyAsync
        calls.callback(None, 1, 700, cb)  # the cuMemcpyDtoDAsync it makes, same correlation id
        assert [(o.kind, o.name, o.correlation_id) for o in rec.ops] == [(4, "cudaMemcpyAsync", 90)]
        assert [(p.address, p.bytes, p.mode, p.exact) for p in rec.pending] == [(0x5000, 4096, READ, 1), (0xD000, 4096, WRITE, 1)]
        rec.tls.depth = 1  # inside a torch op: the op's tensors say what it touches
        cb2, keep2 = self.cbdata([0xD000, 7, 16, 0], corr=91)
        calls.callback(None, 1, 702, cb2)
        assert len(rec.ops) == 1 and rec.tls.launch == 91  # a graph node it makes is still tied to it
        calls.callback(None, 1, 702, self.cbdata([0, 0, 0, 0], corr=91, site=1)[0])
        assert rec.tls.launch == 0 and not rec.errors
        del keep, keep2

    def test_a_graph_launch_records_its_stream(self) -> None:
        rec, _, calls = self.callbacks()
        cb, keep = self.cbdata([0xE000, 0xABC], corr=95)  # cuGraphLaunch(exec, stream): the fake says stream 13
        calls.callback(None, 1, 701, cb)
        assert rec.graph_launches == [(95, 13)] and not rec.errors
        del keep
