"""Memory access sets (`trace run --memory`, issue #15) on CPU: the dispatch mode on CPU tensors
(alias info, views and storage offsets, allocation identity, autograd sequence numbers), the CUPTI
launch callbacks driven with real parameter structs in ctypes memory and a fake CUPTI, and the
TRACER_* tables as written."""
from __future__ import annotations

import ctypes
import enum
import itertools
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from tracer.capture.callbacks import ApiCallbacks, api_name, argument_words, walk_layouts
from tracer.capture.memory_recorder import AllocationIndex, MemoryRecorder, segment_rows
from tracer.capture.nsys_schema import write_sqlite
from tracer.capture.records import AllocationRec, Memory2Rec, Mode, OpKind, TraceRecords
from tracer.capture.torch_mode import PostImport, op_info, start_recording
from tracer.kernel.launch import cast_transpose_accesses


class Recording:
    """A recorder with a counting clock and a log of pushed/popped external ids."""

    def __init__(self) -> None:
        self.ticks = itertools.count(1000, 10)
        self.pushed: list[int] = []
        self.popped = 0
        self.rec = MemoryRecorder(lambda: next(self.ticks), self.pushed.append, self._pop, devices=("cpu",))

    def _pop(self) -> None:
        self.popped += 1

    def __enter__(self) -> MemoryRecorder:
        self.mode = start_recording(self.rec, torch)
        return self.rec

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(None, None, None)


def accesses_of(rec: MemoryRecorder, name: str) -> list:
    ids = [o.id for o in rec.ops if o.name == name]
    return [a for a in rec.accesses if a.op_id in ids]


def test_schema_alias_info_gives_directions_and_views_pass_through() -> None:
    assert op_info(torch.ops.aten.add_.Tensor).writes == {"self"}
    assert op_info(torch.ops.aten.add.out).writes == {"out"}
    assert op_info(torch.ops.aten._foreach_add_.List).writes == {"self"}
    assert op_info(torch.ops.aten.view.default).skip and op_info(torch.ops.aten.split.Tensor).skip
    assert not op_info(torch.ops.aten.mm.default).skip
    assert not op_info(torch.ops.aten._assert_async.default).skip  # no returns, launches a kernel


def test_view_of_a_larger_tensor_is_its_byte_extent_in_the_storage() -> None:
    r = Recording()
    with r as rec:
        a = torch.zeros(4, 8)
        a[1:3, 2:6].add_(1)
        a[:2].mul_(2)
        a[2:].mul_(3)
    base = a.data_ptr()
    (add,) = accesses_of(rec, "aten::add_.Tensor")
    assert (add.address, add.bytes, add.mode, add.exact) == (base + (1 * 8 + 2) * 4, 12 * 4, Mode.WRITE, 1)
    first, second = [(x.address, x.bytes) for x in accesses_of(rec, "aten::mul_.Tensor")]
    assert first == (base, 64) and second == (base + 64, 64)  # disjoint halves: adjacent, not overlapping
    (zeros,) = accesses_of(rec, "aten::zeros")
    assert len({zeros.allocation_id, add.allocation_id}) == 1  # views share their storage's allocation


def test_list_arguments_are_read_and_outputs_written() -> None:
    r = Recording()
    with r as rec:
        x, y = torch.ones(16), torch.ones(16)
        torch.cat([x, y])
        torch.add(x, y, out=torch.empty(16))
    cat = {a.label: a for a in accesses_of(rec, "aten::cat")}
    assert {(a.address, a.mode) for a in accesses_of(rec, "aten::cat") if a.label == "tensors"} == \
        {(x.data_ptr(), Mode.READ), (y.data_ptr(), Mode.READ)}
    assert cat["out 0"].mode == Mode.WRITE
    out = {a.label: a.mode for a in accesses_of(rec, "aten::add.out")}
    assert out == {"self": Mode.READ, "other": Mode.READ, "out": Mode.WRITE}  # out= and the returned alias: one range
    assert r.pushed == [o.id for o in rec.ops] and r.popped == len(rec.ops)


def test_a_range_read_and_written_by_one_op_is_both() -> None:
    r = Recording()
    with r as rec:
        x = torch.ones(8)
        torch.add(x, x, out=x)
    (only,) = accesses_of(rec, "aten::add.out")
    assert only.mode == Mode.READ_WRITE


def test_ops_without_recorded_devices_are_not_recorded() -> None:
    r = Recording()
    r.rec.devices = frozenset({"cuda"})
    with r as rec:
        torch.ones(4) + 1
    assert rec.ops == [] and rec.accesses == []


def test_allocation_labels_name_the_op_and_the_user_line() -> None:
    r = Recording()
    with r as rec:
        y = torch.ones(4) * 2  # the line the label points at
    out = TraceRecords(pid=1)
    rec.finish(out, [])
    labels = {a.label for a in out.allocations}
    line = Path(__file__).read_text().splitlines().index("        y = torch.ones(4) * 2  # the line the label points at") + 1
    assert f"aten::mul.Tensor out 0 at {__file__}:{line}" in labels
    assert all(o.callsite == f"{__file__}:{line}" for o in rec.ops)
    del y


def _two_lines(x: torch.Tensor) -> None:
    for _ in range(3):
        x.mul_(2)  # first
        x.add_(1)  # second


def test_call_sites_are_told_apart_by_line_within_one_function_and_loop() -> None:
    """Call sites are cached per code object and instruction: two ops of one function (and the same
    line run again) keep their own lines."""
    x = torch.ones(4)
    r = Recording()
    with r as rec:
        _two_lines(x)
    src = Path(__file__).read_text().splitlines()
    first, second = (src.index(f"        x.{op}  # {n}") + 1 for op, n in (("mul_(2)", "first"), ("add_(1)", "second")))
    assert [(o.name, o.callsite) for o in rec.ops] == \
        [("aten::mul_.Tensor", f"{__file__}:{first}"), ("aten::add_.Tensor", f"{__file__}:{second}")] * 3


def test_device_checks_read_one_attribute_for_one_device() -> None:
    from tracer.capture.torch_mode import _on_device

    t = torch.ones(2)
    assert _on_device(frozenset({"cpu"}))(t) and not _on_device(frozenset({"cuda"}))(t)
    assert _on_device(frozenset({"cpu", "cuda"}))(t) and not _on_device(frozenset({"meta"}))(t)
    assert not _on_device(frozenset({"cpu"}))(torch.ones(2, device="meta"))


def test_backward_ops_carry_the_forward_ops_sequence_number() -> None:
    r = Recording()
    with r as rec:
        x = torch.randn(4, 4, requires_grad=True)
        (x @ x).relu().sum().backward()
    fwd = {o.name: o.seq_nr for o in rec.ops if o.bwd_seq_nr == -1 and o.seq_nr >= 0}
    bwd = [(o.name, o.bwd_seq_nr) for o in rec.ops if o.bwd_seq_nr >= 0]
    assert ("aten::threshold_backward", fwd["aten::relu"]) in bwd
    assert [b for n, b in bwd if n == "aten::mm"] == [fwd["aten::mm"]] * 2  # MmBackward's two GEMMs
    assert next(o for o in rec.ops if o.name == "aten::randn").seq_nr == -1  # created no node
    assert {b for _, b in bwd} <= {o.seq_nr for o in rec.ops}  # every backward op points at a recorded op


def test_views_that_create_autograd_nodes_are_recorded_without_accesses() -> None:
    r = Recording()
    with r as rec:
        x = torch.randn(4, 4, requires_grad=True)
        x.t().sum().backward()
        x.detach().view(16)  # no node: not recorded
    (view,) = [o for o in rec.ops if o.name == "aten::t"]
    assert view.seq_nr >= 0 and not [a for a in rec.accesses if a.op_id == view.id]
    assert not [o for o in rec.ops if o.name in ("aten::view", "aten::detach")]


def test_storage_identity_splits_instances_at_a_new_storage_without_free_reports() -> None:
    rec = Recording().rec
    first = rec.instance(0x1000, impl=1, nbytes=512, device=0, now=5, label=("aten::empty", "out 0", None))
    assert rec.instance(0x1000, 1, 512, 0, 6, ("aten::add", "self", None)) == first
    second = rec.instance(0x1000, 2, 512, 0, 7, ("aten::empty", "out 0", None))
    assert second != first and rec.allocations[0].end == 7


def test_allocator_reports_split_instances_at_free_and_reuse() -> None:
    rec = Recording().rec
    rec.frees_seen = True
    rec.on_alloc(0x2000)
    first = rec.instance(0x2000, 1, 256, 0, 5000, ("aten::empty", "out 0", None))
    assert rec.instance(0x2000, 9, 256, 0, 5001, ("from_dlpack", "out 0", None)) == first  # another view, same memory
    rec.on_free(0x2000)
    rec.on_alloc(0x2000)
    second = rec.instance(0x2000, 1, 256, 0, 9000, ("aten::empty", "out 0", None))  # same StorageImpl address, reused
    a, b = rec.allocations
    assert second != first and a.start < a.end <= b.start < 9000  # the new instance starts at the allocator's report


def test_index_finds_instances_before_segments_and_respects_lifetimes() -> None:
    torch_rows = [AllocationRec(1, 0, 1000, 100, -1, 10, 50, 1, "a"), AllocationRec(2, 0, 1000, 100, -1, 60, -1, 1, "b")]
    segments = segment_rows([Memory2Rec(1, 0, 4096, 0, 4294967295, 3, 5, 7, ""), Memory2Rec(2, 0, 0, 0, 0, 3, 95, 8, ""),
                             Memory2Rec(1, 9000, 64, 0, 0, 6, 5, 9, "static")], itertools.count(10))
    assert [(s.id, s.stream_id, s.end) for s in segments] == [(10, -1, 95)]  # module statics are left out
    index = AllocationIndex(torch_rows, segments)
    assert index.find(1050, 20).id == 1 and index.find(1050, 70).id == 2
    assert index.find(1100, 20).id == 10  # one past the instance: only the segment holds it
    assert index.find(1050, 55).id == 10 and index.find(1050, 99).id == 2
    assert index.find(2000, 99) is None and index.find(9000, 20) is None  # the segment was freed; statics not indexed


class Params(ctypes.Structure):
    """cuLaunchKernel_params: f, grid x/y/z, block x/y/z, sharedMemBytes, hStream, kernelParams, extra."""
    _fields_ = [("f", ctypes.c_uint64), ("dims", ctypes.c_uint32 * 6), ("shared", ctypes.c_uint32),
                ("hStream", ctypes.c_uint64), ("kernelParams", ctypes.c_uint64), ("extra", ctypes.c_uint64)]


class ParamsEx(ctypes.Structure):
    _fields_ = [("config", ctypes.c_uint64), ("f", ctypes.c_uint64), ("kernelParams", ctypes.c_uint64),
                ("extra", ctypes.c_uint64)]


class CallbackData(ctypes.Structure):
    _fields_ = [("site", ctypes.c_uint32), ("name", ctypes.c_uint64), ("params", ctypes.c_uint64),
                ("ret", ctypes.c_uint64)]


class FakeCupti:
    """The pieces of cupti-python the callbacks use."""

    class CallbackDomain(enum.IntEnum):
        DRIVER_API = 1
        RUNTIME_API = 2
        RESOURCE = 3

    CallbackIdResource = enum.IntEnum("CallbackIdResource", {"GRAPHNODE_CREATED": 10, "GRAPHNODE_CLONED": 15})

    class GraphData:
        """CUpti_GraphData at an address: here a registry of (node, original node) handles."""

        nodes: dict[int, tuple[int, int]] = {}

        def __init__(self, node: int, original_node: int) -> None:
            self.node, self.original_node = node, original_node

        @classmethod
        def from_ptr(cls, ptr: int) -> FakeCupti.GraphData:
            return cls(*cls.nodes[ptr])

    @staticmethod
    def get_graph_node_id(node: int) -> int:
        return node * 10  # ids differ from handles

    driver_api_trace_cbid = enum.IntEnum("driver_api_trace_cbid", {
        "cuLaunchKernel": 307, "cuLaunchKernelEx": 652, "cuLaunchKernel_ptsz": 442, "cuLaunchKernelEx_ptsz": 653,
        "cuEventRecord": 200, "cuEventQuery": 201, "cuStreamQuery": 202, "cuMemAlloc": 5})
    runtime_api_trace_cbid = enum.IntEnum("runtime_api_trace_cbid", {
        "cudaEventRecord_v3020": 135, "cudaEventQuery_v3020": 137, "cudaStreamQuery_v3020": 132,
        "_runtime_api_trace_cbid__cudaLaunchKernel_v13000": 600})

    def __init__(self) -> None:
        self.enabled: list[tuple[int, int]] = []

    def subscribe(self, callback, userdata):
        return 77

    def enable_callback(self, enable: int, sub: int, domain: int, cbid: int) -> None:
        self.enabled.append((int(domain), int(cbid)))

    def get_stream_id_ex(self, context: int, stream: int, per_thread: int) -> int:
        return 13 if stream == 0xABC else 0


class Launch:
    """A launch's argument memory kept alive: two device pointers, a struct by value holding a third, an int."""

    def __init__(self, ex: bool = False) -> None:
        self.x, self.y = ctypes.c_uint64(0x7F0000001000), ctypes.c_uint64(0x7F0000002040)
        self.struct = (ctypes.c_uint64 * 3)(7, 0x7F0000003000, 0x7F0000003008)
        self.n = ctypes.c_int32(4096)
        self.kp = (ctypes.c_uint64 * 4)(*(ctypes.addressof(v) for v in (self.x, self.y, self.struct, self.n)))
        self.params = ParamsEx(0, 0xF00, ctypes.addressof(self.kp), 0) if ex else \
            Params(0xF00, (ctypes.c_uint32 * 6)(), 0, 0, ctypes.addressof(self.kp), 0)
        self.ret = ctypes.c_int32(0)
        self.data = CallbackData(0, 0, ctypes.addressof(self.params), ctypes.addressof(self.ret))

    def cbdata(self, site: int = 0, corr: int = 41, name: str = "triton_kernel") -> SimpleNamespace:
        self.data.site = site
        return SimpleNamespace(callback_site=site, ptr=ctypes.addressof(self.data), correlation_id=corr,
                               symbol_name=name, context=0)


LAYOUT = ((0, 8), (8, 8), (16, 24), (40, 4))


def subscribed(rec: MemoryRecorder, layout: object = LAYOUT) -> tuple[ApiCallbacks, FakeCupti]:
    cupti = FakeCupti()
    calls = ApiCallbacks(cupti, rec, param_layout=lambda f: (layout, "cuKernelGetParamInfo") if layout is not None
                         else (None, "cuFuncGetParamInfo: 400; cuKernelGetParamInfo: 400"))
    calls.subscribe()
    return calls, cupti


@pytest.mark.parametrize("ex", [False, True])
def test_launch_arguments_are_matched_against_live_allocations(ex: bool) -> None:
    rec = Recording().rec
    calls, cupti = subscribed(rec)
    assert (1, 307) in cupti.enabled and (2, 600) not in cupti.enabled and (1, 5) not in cupti.enabled
    rec.instance(0x7F0000001000, 1, 4096, 0, 1, ("aten::empty", "out 0", "a.py:1"))
    rec.instance(0x7F0000002000, 2, 4096, 0, 1, ("aten::empty", "out 0", "a.py:2"))
    launch = Launch(ex)
    calls.callback(None, 1, 652 if ex else 307, launch.cbdata())
    calls.callback(None, 1, 652 if ex else 307, launch.cbdata(site=1))  # the exit: nothing more
    out = TraceRecords(pid=1)
    rec.finish(out, [Memory2Rec(1, 0x7F0000003000, 1 << 20, 0, 4294967295, 3, 0, 1, "")])
    (op,) = [o for o in out.ops if o.kind == OpKind.LAUNCH_ARGS]
    assert (op.correlation_id, op.name) == (41, "triton_kernel")
    got = {(a.address, a.bytes, a.mode, a.exact) for a in out.accesses if a.op_id == op.id}
    assert got == {(0x7F0000001000, 4096, 3, 0), (0x7F0000002040, 4096 - 0x40, 3, 0),  # to the end of the allocation
                   (0x7F0000003000, 1 << 20, 3, 0), (0x7F0000003008, (1 << 20) - 8, 3, 0)}  # inside the struct
    assert out.meta["TRACER_MEMORY_PARAMINFO_CUKERNELGETPARAMINFO"] == "1"


def test_launches_inside_an_op_are_skipped_and_undecodable_ones_listed() -> None:
    rec = Recording().rec
    calls, _ = subscribed(rec, layout=None)
    launch = Launch()
    rec.tls.depth = 1
    calls.callback(None, 1, 307, launch.cbdata())
    assert rec.ops == [] and rec.launch_unknown == []
    rec.tls.depth = 0
    calls.callback(None, 1, 307, launch.cbdata(corr=42, name="ext_kernel"))
    (unknown,) = rec.launch_unknown
    assert unknown.correlation_id == 42 and unknown.name == "ext_kernel" and "cuKernelGetParamInfo: 400" in unknown.reason


def test_graph_nodes_made_inside_a_launch_and_their_clones_are_recorded() -> None:
    """A launch into a capturing stream makes its node between the launch's enter and exit;
    instantiation clones it; a node made outside any launch (an explicit graph API) is left out."""
    rec = Recording().rec
    calls, cupti = subscribed(rec)
    assert (3, 10) in cupti.enabled and (3, 15) in cupti.enabled
    cupti.GraphData.nodes.update({1: (5, 0), 2: (6, 0), 3: (9, 5)})
    launch = Launch()
    rec.tls.depth = 1  # inside an op: the node is still tied to the launch
    calls.callback(None, 1, 307, launch.cbdata(corr=70))
    calls.callback(None, 3, 10, SimpleNamespace(resource_descriptor=1))
    calls.callback(None, 1, 307, launch.cbdata(site=1, corr=70))
    calls.callback(None, 3, 10, SimpleNamespace(resource_descriptor=2))  # outside a launch
    calls.callback(None, 3, 15, SimpleNamespace(resource_descriptor=3))  # node 9 cloned from 5
    assert rec.graph_nodes == [(50, 70, -1), (90, -1, 50)] and not rec.errors
    out = TraceRecords(pid=1)
    rec.finish(out, [])
    assert out.graph_nodes == rec.graph_nodes


def test_successful_queries_say_which_record_the_host_saw_complete() -> None:
    rec = Recording().rec
    calls, _ = subscribed(rec)
    event, stream = ctypes.c_uint64(0xE1), ctypes.c_uint64(0xABC)
    rec_params = (ctypes.c_uint64 * 2)(0xE1, 0xABC)
    q_params = (ctypes.c_uint64 * 1)(0xE1)
    ret = ctypes.c_int32(0)

    def call(domain: int, cbid: int, params: object, site: int, corr: int, rv: int = 0) -> None:
        ret.value = rv
        data = CallbackData(site, 0, ctypes.addressof(params), ctypes.addressof(ret))  # type: ignore[arg-type]  # params is a ctypes array, typed object in the helper
        calls.callback(None, domain, cbid, SimpleNamespace(callback_site=site, ptr=ctypes.addressof(data),
                                                           correlation_id=corr, symbol_name="", context=0))

    for site in (0, 1):
        call(2, 135, rec_params, site, corr=10)  # cudaEventRecord(event, stream)
    call(2, 137, q_params, 0, corr=11)
    call(2, 137, q_params, 1, corr=11, rv=600)  # not ready: not a completion
    call(2, 137, q_params, 0, corr=12)
    call(1, 201, q_params, 0, corr=12)  # the nested driver call
    call(1, 201, q_params, 1, corr=12)
    call(2, 137, q_params, 1, corr=12)
    s_params = (ctypes.c_uint64 * 1)(0xABC)
    call(2, 132, s_params, 0, corr=13)
    call(2, 132, s_params, 1, corr=13)
    del event, stream
    queries = sorted(rec.host_queries.values())
    assert [(q.correlation_id, q.kind, q.record_correlation_id, q.stream_id) for q in queries] == [(12, 1, 10, -1), (13, 2, -1, 13)]
    assert queries[0].start < queries[0].end


def test_parameter_layout_methods_are_tried_in_turn() -> None:
    ok, past = 0, 1
    layout = [(0, ok, 0, 8), (1, ok, 8, 4), (2, past, 0, 0)]
    by_kernel = {i: (e, o, s) for i, e, o, s in layout}
    attempts = [("cuFuncGetParamInfo", lambda i: (400, 0, 0)), ("cuKernelGetParamInfo", lambda i: by_kernel[i])]
    assert walk_layouts(attempts, ok, past) == (((0, 8), (8, 4)), "cuKernelGetParamInfo")
    assert walk_layouts([("a", lambda i: (past, 0, 0)), ("b", lambda i: (400, 0, 0))], ok, past) == ((), "a")
    layout_none, why = walk_layouts([("a", lambda i: (400, 0, 0)), ("b", lambda i: (_ for _ in ()).throw(RuntimeError("x")))], ok, past)
    assert layout_none is None and "a: 400" in why and "RuntimeError" in why


def test_argument_words_read_pointer_sized_fields_only() -> None:
    launch = Launch()
    assert argument_words(LAYOUT, ctypes.addressof(launch.kp)) == [0x7F0000001000, 0x7F0000002040, 7, 0x7F0000003000,
                                                                   0x7F0000003008]
    assert api_name("_runtime_api_trace_cbid__cudaLaunchKernel_ptsz_v13000") == "cudaLaunchKernel_ptsz"
    assert api_name("cudaEventRecordWithFlags_v11010") == "cudaEventRecordWithFlags"


def test_tracer_launches_record_exact_accesses() -> None:
    rec = Recording().rec
    x = rec.instance(0x10000, 1, 1024 * 512 * 2, 0, 1, ("aten::randn", "out 0", None))
    pointers = (0x10000, 0x200000, 0x300000, 0x400000, 0x400100, 0x400200)
    with rec.tracer_launch("cast_transpose", cast_transpose_accesses(pointers, 1024, 512, 2, 1)):
        assert rec.tls.depth == 1
    assert rec.tls.depth == 0
    out = TraceRecords(pid=1)
    rec.finish(out, [])
    (op,) = out.ops
    assert op.kind == OpKind.TRACER and op.name == "cast_transpose"
    got = {a.label: (a.address, a.bytes, a.mode, a.exact, a.allocation_id) for a in out.accesses}
    assert got["x"] == (0x10000, 1024 * 512 * 2, 1, 1, x) and got["rowwise"][1:4] == (1024 * 512, 2, 1)
    assert got["scale"][:2] == (0x400004, 4) and got["amax"][2] == 3 and got["rowwise"][4] == -1  # not a known allocation


def test_memory_tables_are_written_with_the_trace(tmp_path: Path) -> None:
    r = Recording()
    with r as rec:
        a = torch.zeros(64)
        a.add_(1)
    rec.unknown_launch(5, "mystery", "parameter layout unavailable (x)")
    rec.graph_node(8589934592, 7, -1)
    out = TraceRecords(pid=321, memory=True)
    rec.finish(out, [])
    out.ext_correlations += [(100, 1), (100, 1), (101, 2)]  # a runtime call and its nested driver call
    write_sqlite(out, tmp_path / "t.sqlite", producer="fake")
    con = sqlite3.connect(tmp_path / "t.sqlite")
    s = dict(con.execute("SELECT id, value FROM StringIds"))
    ops = con.execute("SELECT id, kind, nameId, globalTid, seqNr, bwdSeqNr, callsiteId FROM TRACER_OPS").fetchall()
    assert [(s[o[2]], o[1], o[3] >> 24) for o in ops] == [("aten::zeros", 1, 321), ("aten::add_.Tensor", 1, 321)]
    assert con.execute("SELECT * FROM TRACER_EXTERNAL_CORRELATION").fetchall() == [(100, 1), (101, 2)]
    acc = con.execute("SELECT opId, address, bytes, mode, exact, allocationId FROM TRACER_MEMORY_ACCESS").fetchall()
    assert acc == [(1, a.data_ptr(), 256, 2, 1, 1), (2, a.data_ptr(), 256, 2, 1, 1)]
    (alloc,) = con.execute("SELECT id, address, bytes, end, source, labelId FROM TRACER_ALLOCATIONS").fetchall()
    assert alloc[:5] == (1, a.data_ptr(), 256, -1, 1) and s[alloc[5]].startswith("aten::zeros out 0 at ")
    assert con.execute("SELECT COUNT(*) FROM TRACER_HOST_QUERIES").fetchone() == (0,)
    assert con.execute("SELECT * FROM TRACER_GRAPH_NODES").fetchall() == [(8589934592, 7, -1)]
    (unknown,) = con.execute("SELECT correlationId, nameId, reason FROM TRACER_LAUNCH_UNKNOWN").fetchall()
    assert (unknown[0], s[unknown[1]]) == (5, "mystery")
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert meta["TRACER_MEMORY"] == "1" and meta["TRACER_MEMORY_FREES"] == "storage identity"


def test_trace_without_memory_has_no_memory_tables(tmp_path: Path) -> None:
    write_sqlite(TraceRecords(pid=1), tmp_path / "t.sqlite")
    con = sqlite3.connect(tmp_path / "t.sqlite")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {t for t in tables if t.startswith("TRACER_")}
    assert "TRACER_MEMORY" not in dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))


def test_post_import_hook_runs_once_the_module_is_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "late_pkg").mkdir()
    (tmp_path / "late_pkg" / "__init__.py").write_text("READY = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[bool] = []
    import sys

    hook = PostImport("late_pkg", lambda m: seen.append(m.READY))
    sys.meta_path.insert(0, hook)
    import late_pkg

    assert seen == [True] and hook not in sys.meta_path and late_pkg.__spec__.loader.__class__.__name__ != "_ThenLoader"


class ActivityCupti(FakeCupti):
    """Enough of cupti-python's activity API for the collector's start."""

    ActivityKind = enum.IntEnum("ActivityKind", ["CONCURRENT_KERNEL", "RUNTIME", "DRIVER", "SYNCHRONIZATION", "CUDA_EVENT",
                                                 "STREAM", "MEMCPY", "MEMSET", "MARKER", "EXTERNAL_CORRELATION", "MEMORY2"])
    ExternalCorrelationKind = enum.IntEnum("ExternalCorrelationKind", ["CUSTOM0"])
    ActivityThreadIdType = enum.IntEnum("ActivityThreadIdType", ["SYSTEM"])
    driver_api_trace_cbid = enum.IntEnum("driver_api_trace_cbid", {
        "cuLaunchKernel": 307, "cuDevicePrimaryCtxGetState": 3, "cuCtxGetCurrent": 4, "cuKernelGetName": 5,
        "cuGetProcAddress_v2": 6, "cuStreamWaitEvent": 7, "cuEventQuery": 8, "cuMemcpyAsync": 9, "cuDeviceGet": 10})
    runtime_api_trace_cbid = enum.IntEnum("runtime_api_trace_cbid", {
        "cudaGetDevice_v3020": 17, "cudaGetLastError_v3020": 10, "cudaPeekAtLastError_v3020": 11,
        "cudaStreamIsCapturing_v10000": 12, "cudaEventRecord_v3020": 135, "cudaStreamSynchronize_v3020": 131,
        "cudaDeviceGetStreamPriorityRange_v5050": 13, "cudaLaunchKernel_v7000": 211, "cudaEventElapsedTime_v3020": 14,
        "cudaMemsetAsync_v3020": 15})

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[int] = []
        self.off: set[str] = set()

    def set_thread_id_type(self, kind: int) -> None:
        pass

    def activity_register_callbacks(self, requested, completed) -> None:
        pass

    def activity_enable(self, kind: int) -> None:
        self.kinds.append(kind)

    def activity_enable_all_sync_records(self, on: int) -> None:
        pass

    def activity_enable_driver_api(self, cbid: int, on: int) -> None:
        assert self.kinds and not on  # after the kinds are on: switching a kind on again would forget these
        self.off.add(self.driver_api_trace_cbid(cbid).name)

    def activity_enable_runtime_api(self, cbid: int, on: int) -> None:
        assert self.kinds and not on
        self.off.add(self.runtime_api_trace_cbid(cbid).name)


@pytest.mark.parametrize("apis", ["filtered", "all"])
def test_getters_are_left_out_of_the_api_records(apis: str) -> None:
    from tracer.capture.collector import Collector, start

    cupti = ActivityCupti()
    collector = Collector(cupti, memory=True, apis=apis)
    start(collector)
    if apis == "all":
        assert cupti.off == set() and collector.rec.meta["TRACER_API_RECORDS"] == "all"
        return
    assert cupti.off == {"cuDevicePrimaryCtxGetState", "cuCtxGetCurrent", "cuKernelGetName", "cuGetProcAddress_v2", "cuDeviceGet",
                         "cudaGetDevice_v3020", "cudaGetLastError_v3020", "cudaPeekAtLastError_v3020",
                         "cudaStreamIsCapturing_v10000", "cudaDeviceGetStreamPriorityRange_v5050"}
    assert collector.rec.meta["TRACER_API_RECORDS"] == "getters left out (10 APIs)"


@pytest.mark.parametrize("parts", [("dispatch", "allocator"), ("allocator",), ()])
def test_memory_parts_can_be_left_out(parts: tuple[str, ...]) -> None:
    r = Recording()
    mode = start_recording(r.rec, torch, dispatch="dispatch" in parts, allocator="allocator" in parts)
    try:
        (torch.ones(8) * 2).sum()
    finally:
        if mode is not None:
            mode.__exit__(None, None, None)
    assert (mode is not None) == ("dispatch" in parts) and bool(r.rec.ops) == ("dispatch" in parts)


def test_the_dispatch_mode_leaves_dynamo_unimported(tmp_path: Path) -> None:
    """torch wraps a mode's dispatch in Dynamo's `disable`, importing torch._dynamo (seconds) at the
    first op; tracer's mode does that only when the program imports Dynamo itself."""
    import subprocess
    import sys

    code = ("import sys, time, torch\n"
            "from tracer.capture.memory_recorder import MemoryRecorder\n"
            "from tracer.capture.timing import Timing\n"
            "from tracer.capture.torch_mode import start_recording\n"
            "rec, timing = MemoryRecorder(time.time_ns, lambda i: None, lambda: None, devices=('cpu',)), Timing()\n"
            "mode = start_recording(rec, torch, timing=timing)\n"
            "(torch.ones(4) + 1).sum()\n"
            "print('torch._dynamo' in sys.modules, len(rec.ops), timing.hooks['dispatch'][0] >= 2)\n"
            "f = torch.compile(lambda x: x * 2, backend='eager')\n"
            "print(type(mode).__torch_dispatch__.__dict__.get('_torchdynamo_disable', False), 'torch_dynamo_imported' in timing.marks)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["False", "3", "True", "True", "True"], out.stderr


class DeliveringCupti(ActivityCupti):
    """ActivityCupti that also hands records over: flushes call the completion callback."""

    CallbackDomain = FakeCupti.CallbackDomain

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[SimpleNamespace] = []
        self.flushes: list[int] = []
        self.pushed: list[int] = []

    def activity_register_callbacks(self, requested, completed) -> None:
        self.completed = completed

    def activity_flush_all(self, flag: int) -> None:
        self.flushes.append(flag)
        batch, self.pending = self.pending, []
        self.completed(batch)

    def activity_disable(self, kind: int) -> None:
        pass

    def get_timestamp(self) -> int:
        return 5_000

    def activity_push_external_correlation_id(self, kind: int, oid: int) -> None:
        self.pushed.append(oid)

    def activity_pop_external_correlation_id(self, kind: int) -> None:
        pass

    def get_callback_name(self, domain: int, cbid: int) -> str:
        return "cudaLaunchKernel_v7000"

    def launch(self, corr: int, name: str) -> None:
        K = self.ActivityKind
        self.pending.append(SimpleNamespace(kind=int(K.RUNTIME), start=corr * 10, end=corr * 10 + 5, thread_id=9,
                                            correlation_id=corr, cbid=211, return_value=0))
        self.pending.append(SimpleNamespace(
            kind=int(K.CONCURRENT_KERNEL), start=corr * 10 + 6, end=corr * 10 + 9, device_id=0, context_id=1, stream_id=7,
            correlation_id=corr, name=name, grid_x=1, grid_y=1, grid_z=1, block_x=32, block_y=1, block_z=1,
            registers_per_thread=16, static_shared_memory=0, dynamic_shared_memory=0, graph_id=0, graph_node_id=0))


def test_the_cupti_backend_starts_flushes_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUPTI backend driven through cupti-python's calls (a fake CUPTI): nothing before
    activation, records taken batch by batch into the trace file, the rest at stop."""
    import sys

    from tracer.capture.backends import CuptiBackend
    from tracer.capture.nsys_schema import TraceWriter
    from tracer.capture.options import CaptureOptions
    from tracer.capture.timing import Timing

    fake = DeliveringCupti()
    monkeypatch.setitem(sys.modules, "cupti", SimpleNamespace(cupti=fake))
    r = Recording()
    backend = CuptiBackend(CaptureOptions(memory=True, parts=("dispatch",)), 42, Timing())
    assert not backend.active and backend.take().kernels == []
    backend.activate(r.rec)
    assert backend.active and r.rec.clock() == 5_000 and "cudaGetDevice_v3020" in fake.off
    r.rec.begin()
    r.rec.end()
    assert fake.pushed == [1]  # the recorder now pushes through CUPTI
    writer = TraceWriter(tmp_path / "t.sqlite", 42, "cupti")
    fake.launch(1, "_Z3onev")
    backend.flush()
    writer.append(backend.take())
    backend.flush(forced=True)  # after a device synchronisation (Session.flush_at_sync)
    fake.launch(2, "_Z3twov")
    rec, memory2 = backend.stop(forked=False, quick=True)
    writer.close(rec)
    assert fake.flushes == [0, 1, 1] and memory2 == [] and writer.kernels == 2
    con = sqlite3.connect(tmp_path / "t.sqlite")
    names = [r[0] for r in con.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                                       "ORDER BY k.start")]
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert names == ["one", "two"] and meta["TRACER_API_RECORDS"].startswith("getters left out")
    assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone() == (2,)
