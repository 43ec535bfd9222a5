"""Issue #26, second round, on CPU: the memory capture window (`--memory-steps`, `--memory-range`),
collectives through the c10d ops that launch them, and the struct reads of activity records. The
captures (tests/data/hazards/window_steps, collective_*; scripts/device_memory.sh on the H200,
collected by scripts/capture_hazard_fixtures.py --only) are judged here with no GPU."""
from __future__ import annotations

import ctypes
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA
from tests.trace_synthetic import copy_with
from tracer.capture.fastrecords import FastRecords, dtype_name
from tracer.capture.memory_recorder import MemoryRecorder
from tracer.capture.records import Mode
from tracer.capture.window import (MemoryWindow, WindowSpec, hook_nvtx_domain, hook_nvtx_package, hook_torch_nvtx, parse_steps,
                                   spec_of, step_number)
from tracer.cli import main
from tracer.analysis.analyze import analyze
from tracer.readers.load import load_trace

FIXTURES = DATA / "hazards"


def ticking() -> object:
    n = iter(range(1, 10_000))
    return lambda: next(n)


# --- the window ---------------------------------------------------------------------------------

def test_step_names_and_the_slice() -> None:
    assert [step_number(n) for n in ("step3", "iteration 3/fwd", "iter_12", "ProfilerStep#7", "steps", "layer3")] == [
        3, 3, 12, 7, None, None]
    assert parse_steps("2:5") == (2, 5)
    for bad in ("5:2", "3", "a:b", "1:1", "-1:3"):
        with pytest.raises(ValueError, match="must be A:B"):
            parse_steps(bad)
    spec = WindowSpec(first=1, stop=3)
    assert [spec.opens(f"step{i}") for i in range(4)] == [False, True, True, False]
    assert WindowSpec(glob="it*/fwd").opens("it4/fwd") and not WindowSpec(glob="it*/fwd").opens("it4/bwd")
    assert spec_of("", "").whole_run and spec_of("9:x", "").whole_run  # a bad value never records less
    assert spec_of("1:3", "").describe() == "steps 1:3" and spec_of("", "opt*").describe() == "NVTX ranges 'opt*'"


def test_window_opens_on_any_thread_and_closes_with_the_last_range() -> None:
    w = MemoryWindow(WindowSpec(first=1, stop=3), ticking())
    seen: list[bool] = []
    w.listeners.append(seen.append)
    w.push("step0")
    w.push("step0/fwd")
    assert not w.open
    w.pop(), w.pop()
    w.push("step1")
    worker = threading.Thread(target=lambda: (w.push("step2"), w.pop()))  # a second thread's range inside it
    worker.start()
    worker.join()
    assert w.open and w.depth == 1
    w.pop()
    assert not w.open and seen == [True, False]
    rid = w.start("step2")  # start/end ranges (any thread may end them)
    assert w.open
    w.end(rid)
    assert len(w.finish()) == 2 and all(a < b for a, b in w.finish())


def test_a_window_still_open_at_exit_ends_there() -> None:
    w = MemoryWindow(WindowSpec(glob="train*"), ticking())
    w.push("train")
    (start, end), = w.finish()
    assert start < end and w.open


def test_nvtx_hooks_see_torch_and_nvtx_package_ranges() -> None:
    calls: list[str] = []

    class Real:
        def rangePushA(self, msg: str) -> int:  # torch's name
            calls.append(msg)
            return 0

        def rangePop(self) -> int:  # torch's name
            calls.append("pop")
            return 0

        def markA(self, msg: str) -> None:  # torch's name
            calls.append(f"mark {msg}")

    class TorchNvtx:
        _nvtx = Real()

    w = MemoryWindow(WindowSpec(first=0, stop=1), ticking())
    hook_torch_nvtx(w, TorchNvtx)
    TorchNvtx._nvtx.rangePushA("step0")
    assert w.open
    TorchNvtx._nvtx.rangePop()
    TorchNvtx._nvtx.markA("x")  # the rest passes through
    assert not w.open and calls == ["step0", "pop", "mark x"]

    class Message:
        string = "step0"

    class Attributes:
        message = Message()

    class Package:
        libnvtx_push_range = staticmethod(lambda attributes, domain: calls.append("push"))
        libnvtx_pop_range = staticmethod(lambda domain: calls.append("pop"))

    hook_nvtx_package(w, Package)
    Package.libnvtx_push_range(Attributes(), 1)
    assert w.open
    Package.libnvtx_pop_range(1)
    assert not w.open and calls[-2:] == ["push", "pop"]


def test_dispatch_mode_records_only_inside_the_window() -> None:
    torch = pytest.importorskip("torch")
    from tracer.capture import torch_mode

    rec = MemoryRecorder(time.perf_counter_ns, lambda i: None, lambda: None, devices=("cpu",),
                         window=WindowSpec(first=1, stop=2))
    mode = torch_mode.make_mode(rec, torch)
    x = torch.ones(8)
    with mode:
        for s in range(3):
            rec.window.push(f"step{s}")
            x.add_(float(s))
            rec.window.pop()
    assert [o.name for o in rec.ops] == ["aten::add_.Tensor"]  # step1's only
    assert float(x[0]) == 4.0  # every op ran


# --- the window in a capture (window_steps: the same RAW planted in 4 steps, steps 1:3 recorded) ----

def test_window_capture_judges_its_steps_and_counts_the_rest_as_not_judged() -> None:
    a = analyze(load_trace(FIXTURES / "window_steps.sqlite"))
    h = a.hazards
    assert h is not None and dict(h.counts)["RAW"] == 2
    assert {(z.producer.range, z.consumer.range) for z in h.listed} == {("step1", "step1"), ("step2", "step2")}
    cov = {c.kind.value: c for c in h.coverage}
    assert (cov["outside-window"].seen, cov["outside-window"].unjudged, cov["outside-window"].window) == (10, 10, "steps 1:3")
    assert cov["kernel"].unjudged == 0  # counted once, under the window
    line = ("not judged: 10 of 10 outside-window operation(s): launched outside the memory capture window (steps 1:3), "
            "traced as plain CUPTI; hazards unknown for them")
    assert a.failures(False, True) == ["2 cross-stream memory hazard(s)", line]
    assert h.text_lines()[0].endswith("memory sets recorded in steps 1:3 only")
    assert h.to_json()["coverage"][-1] == {"kind": "outside-window", "seen": 10, "judged": 0, "unjudged": 10, "window": "steps 1:3"}


def test_a_named_window_without_its_intervals_still_fails_closed(tmp_path: Path) -> None:
    """TRACER_MEMORY_WINDOWS emptied (a truncated capture): the operations without memory sets are all
    outside the (unknown) window, still counted and failing the check, none judged as clean."""
    path = copy_with(FIXTURES / "window_steps.sqlite", tmp_path / "t.sqlite", "DELETE FROM TRACER_MEMORY_WINDOWS",
                     "DELETE FROM META_DATA_EXPORT WHERE name = 'TRACER_MEMORY_WINDOW'")
    a = analyze(load_trace(path))
    h = a.hazards
    assert h is not None
    cov = {c.kind.value: c for c in h.coverage}
    assert "outside-window" not in cov and cov["kernel"].unjudged == 8  # no window known: counted as kernels without sets
    assert [f for f in a.failures(False, True) if f.startswith("not judged")]


def test_window_options_are_checked_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in ((["--memory-steps", "3"], "--memory-steps '3' must be A:B"),
                          (["--memory-steps", "1:3", "--memory-range", "s*"], "give one capture window, not both"),
                          (["--no-memory", "--memory-range", "s*"], "--memory-range needs --memory")):
        assert main(["trace", "run", *argv, "--", "true"]) == 2
        assert message in capsys.readouterr().err


# --- collectives ---------------------------------------------------------------------------------

def test_c10d_schemas_are_read_as_collectives() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.distributed")  # registers the c10d ops
    from tracer.capture.torch_mode import op_info

    c10d = torch.ops.c10d
    assert (op_info(c10d.allreduce_.default).writes, op_info(c10d.allreduce_.default).updates) == ({"tensors"}, {"tensors"})
    assert op_info(c10d.allgather_.default).writes == {"output_tensors"}
    assert op_info(c10d._reduce_scatter_base_.default).writes == {"output_tensor"}
    assert op_info(c10d.send.default).writes == frozenset()
    info = op_info(c10d.allreduce_.default)
    assert info.mode_of("tensors") == Mode.READ_WRITE and info.mode_of("process_group") == Mode.READ
    assert info.modes == tuple(info.mode_of(a) for a in info.arg_names)


def test_a_gloo_collective_is_recorded_through_the_dispatch_mode(tmp_path: Path) -> None:
    """One rank of gloo on CPU tensors: c10d::allreduce_ reads and writes its tensor."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    from tracer.capture import torch_mode

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        rec = MemoryRecorder(time.perf_counter_ns, lambda i: None, lambda: None, devices=("cpu",))
        t = torch.ones(16)
        with torch_mode.make_mode(rec, torch):
            dist.all_reduce(t)
        (op,) = [o for o in rec.ops if o.name == "c10d::allreduce_"]
        assert {(a.address, a.bytes, a.mode) for a in rec.accesses if a.op_id == op.id} == {(t.data_ptr(), 64, Mode.READ_WRITE)}
    finally:
        dist.destroy_process_group()


def test_collective_launched_with_no_wait_is_a_raw_on_the_nccl_stream() -> None:
    """collective_no_wait (NCCL, one rank): the side stream's write, then all_reduce (twice) and
    all_gather_into_tensor with no wait on it: three RAW, each consumer the NCCL operation of the
    c10d op, on NCCL's own stream."""
    h = analyze(load_trace(FIXTURES / "collective_no_wait.sqlite")).hazards
    assert h is not None and dict(h.counts)["RAW"] == 3 and h.found == 3 and h.not_judged == ()
    got = sorted((z.producer.op or "", z.consumer.op or "", z.consumer.range, z.consumer.kernel) for z in h.listed)
    assert [g[:3] for g in got] == [("aten::add_.Tensor", "c10d::_allgather_base_", "ncclAllGather"),  # NCCL's own ranges
                                    ("aten::mul_.Tensor", "c10d::allreduce_", "ncclAllReduce"),
                                    ("aten::mul_.Tensor", "c10d::allreduce_", "ncclAllReduce")]
    assert got[0][3] == "[memcpy DtoD]" and all("oneRankReduce" in g[3] for g in got[1:])  # NCCL's one-rank reduce kernel
    assert len({z.consumer.stream for z in h.listed}) == 1 and all(z.producer.stream != z.consumer.stream for z in h.listed)
    cov = {c.kind.value: (c.seen, c.judged, c.unjudged) for c in h.coverage}
    assert cov["collective"] == (3, 3, 0)  # the one-rank kernels, known by their c10d op (not named nccl*)


def test_ddp_buckets_and_an_ordered_collective_are_clean() -> None:
    a = analyze(load_trace(FIXTURES / "collective_ddp.sqlite"))
    h = a.hazards
    assert h is not None and h.found == 0 and h.not_judged == () and a.failures(False, True) == []
    assert {c.kind.value: (c.seen, c.judged) for c in h.coverage}["collective"] == (1, 1)  # the explicit AVG all_reduce
    con = sqlite3.connect(FIXTURES / "collective_ddp.sqlite")
    names = dict(con.execute("SELECT s.value, count(*) FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId "
                             "WHERE s.value LIKE 'c10d::%' GROUP BY 1").fetchall())
    con.close()
    assert names["c10d::allreduce_"] >= 3  # the gradient buckets of 3 steps (and the explicit one)


# --- activity records read from their structs -------------------------------------------------------

class ActivityFake:
    """A record as cupti-python gives it: attributes, and `ptr` to the C struct they come from."""

    def __init__(self, buf: np.ndarray, name: bytes) -> None:
        self.buf, self.keep = buf, ctypes_string(name)
        buf["name"] = self.keep[1]
        self.ptr = buf.ctypes.data
        self.start, self.end, self.kind, self.name = int(buf["start"][0]), int(buf["end"][0]), int(buf["kind"][0]), name.decode()


def ctypes_string(text: bytes) -> tuple[object, int]:
    import ctypes

    s = ctypes.create_string_buffer(text)
    return s, ctypes.addressof(s)


def test_struct_reads_agree_with_the_attributes_or_are_not_used() -> None:
    dtype = np.dtype({"names": ["start", "kind", "end", "name"], "formats": ["<u8", "<u4", "<u8", "<u8"],
                      "offsets": [0, 8, 16, 24], "itemsize": 40})

    class Module:
        activity_fake_dtype = dtype

    assert dtype_name("ActivityFake") == "activity_fake_dtype" and dtype_name("ActivityAPI") == "activity_api_dtype"
    buf = np.zeros(1, dtype=dtype)
    buf["start"], buf["end"], buf["kind"] = 10, 20, 3
    a = ActivityFake(buf, b"kernel_a")
    errors: list[str] = []
    fast = FastRecords(Module, lambda where, exc: errors.append(where))
    fields = ("start", "end", "name", "kind")
    slow = lambda r: (r.start, r.end, r.name, r.kind)
    assert fast.read(a, fields, slow) == (10, 20, "kernel_a", 3) and errors == []
    a.start = 11  # the struct changed under the attributes: read from the struct, not the attributes
    buf["start"] = 12
    assert fast.read(a, fields, slow)[0] == 12

    class Wrong:  # offsets that disagree: the attribute reads stay, said once
        activity_fake_dtype = np.dtype({"names": ["start", "kind", "end", "name"], "formats": ["<u8", "<u4", "<u8", "<u8"],
                                        "offsets": [8, 0, 16, 24], "itemsize": 40})

    slow_only = FastRecords(Wrong, lambda where, exc: errors.append(where))
    b = ActivityFake(buf, b"kernel_b")
    assert slow_only.read(b, fields, slow) == slow(b) and errors == ["fast_records_ActivityFake"]
    assert slow_only.read(b, fields, slow) == slow(b) and len(errors) == 1


# --- CUDA-array copies (array_copy: cudaMemcpy2DToArrayAsync reading what another stream writes) -------

def test_a_cuda_array_copy_is_not_judged_and_says_why() -> None:
    a = analyze(load_trace(FIXTURES / "array_copy.sqlite"))
    h = a.hazards
    assert h is not None and h.found == 0  # the race is there, but an array side has no byte range to judge
    cov = {c.kind.value: (c.seen, c.judged, c.unjudged) for c in h.coverage}
    assert cov["memcpy"] == (1, 0, 1) and cov["undecoded-launch"] == (1, 0, 1)
    assert h.launch_unknown == (("cudaMemcpy2DToArrayAsync", 1, "a side is a CUDA array (opaque layout, not linear memory): "
                                                               "not judged"),)
    assert any("memcpy" in f and "CUDA array" in f for f in a.failures(False, True))
    assert "judged 2 of 3 GPU operations" in h.text_lines()[0]


def test_a_jobs_coverage_keeps_the_window() -> None:
    from tracer.analysis.hazards import Coverage, Covered, joined_coverage

    rank = (Coverage(kind=Covered.KERNEL, seen=4, judged=4, unjudged=0),
            Coverage(kind=Covered.OUTSIDE_WINDOW, seen=3, judged=0, unjudged=3, window="steps 1:3"))
    other = (rank[0], Coverage(kind=Covered.OUTSIDE_WINDOW, seen=2, judged=0, unjudged=1, window="NVTX ranges 'opt*'"))
    joined = {c.kind: c for c in joined_coverage([rank, rank, other])}
    out = joined[Covered.OUTSIDE_WINDOW]
    assert (out.seen, out.unjudged, out.window) == (8, 7, "steps 1:3; NVTX ranges 'opt*'")
    assert "outside the memory capture window (steps 1:3; NVTX ranges 'opt*')" in out.line()


def test_launch_and_copy_callbacks_are_switched_with_the_window() -> None:
    """Outside the window CUPTI calls no Python on launches and copies; a copy call that still
    arrives (switching failed) is not recorded."""
    import enum

    from tests.test_capture_memory import FakeCupti
    from tests.test_ops_hazards import TestCopyCallbacks
    from tracer.capture.callbacks import ApiCallbacks

    class Cupti(FakeCupti):
        driver_api_trace_cbid = enum.IntEnum("driver_api_trace_cbid", {
            **{m.name: m.value for m in FakeCupti.driver_api_trace_cbid}, "cuMemcpyDtoDAsync_v2": 700})

        def enable_callback(self, enable: int, sub: int, domain: int, cbid: int) -> None:
            self.enabled.append((int(enable), int(domain), int(cbid)))

        def unsubscribe(self, sub: int) -> None:
            pass

    rec = MemoryRecorder(ticking(), lambda i: None, lambda: None, devices=("cpu",), window=WindowSpec(first=1, stop=2))
    cupti = Cupti()
    calls = ApiCallbacks(cupti, rec, roles=("launch", "record"))
    calls.subscribe()
    windowed = {(d, c) for (d, c), (role, _) in calls.roles.items() if role in ("launch", "launch_ex", "copy")}
    assert (1, 700) in windowed and {(e, d, c) for e, d, c in cupti.enabled if e == 0} == {(0, d, c) for d, c in windowed}
    cb, keep = TestCopyCallbacks.cbdata([0xD000, 0x5000, 4096, 3, 0], corr=90)
    calls.callback(None, 1, 700, cb)
    assert rec.ops == []  # closed: not recorded
    cupti.enabled.clear()
    rec.window.push("step1")
    assert {(e, d, c) for e, d, c in cupti.enabled} == {(1, d, c) for d, c in windowed}
    cb2, keep2 = TestCopyCallbacks.cbdata([0xD000, 0x5000, 4096, 3, 0], corr=91)
    calls.callback(None, 1, 700, cb2)
    assert [(o.name, o.correlation_id) for o in rec.ops] == [("cuMemcpyDtoDAsync", 91)]
    calls.unsubscribe()
    assert rec.window.listeners == []
    del keep, keep2


class _Attributes(ctypes.Structure):  # nvtxEventAttributes_t (version 2)
    _fields_ = [("version", ctypes.c_uint16), ("size", ctypes.c_uint16), ("category", ctypes.c_uint32),
                ("colorType", ctypes.c_int32), ("color", ctypes.c_uint32), ("payloadType", ctypes.c_int32),
                ("reserved0", ctypes.c_int32), ("payload", ctypes.c_uint64), ("messageType", ctypes.c_int32),
                ("message", ctypes.c_void_p)]


class _NvtxData(ctypes.Structure):  # CUpti_NvtxData
    _fields_ = [("functionName", ctypes.c_char_p), ("functionParams", ctypes.c_void_p),
                ("functionReturnValue", ctypes.c_void_p)]


class _Call:
    """One NVTX callback's data as CUPTI lays it out: params words, a returned 64-bit value."""

    def __init__(self, *params: int, returned: int | None = None) -> None:
        self.params = (ctypes.c_uint64 * max(len(params), 1))(*params)
        self.ret = ctypes.c_uint64(returned or 0)
        self.data = _NvtxData(b"nvtx", ctypes.addressof(self.params),
                              ctypes.addressof(self.ret) if returned is not None else None)
        self.ptr = ctypes.addressof(self.data)


def test_nvtx_calls_through_cupti_open_the_window_from_any_api() -> None:
    """C's nvtxRangePushA/Pop, nvtxRangeStartA/End (matched by the returned id) and the domain forms
    with an ASCII message and a registered string; a range whose name cannot be read opens nothing."""
    from tracer.capture.callbacks import NvtxCalls

    rec = MemoryRecorder(ticking(), lambda i: None, lambda: None, devices=("cpu",), window=WindowSpec(glob="win*"))
    calls = NvtxCalls(rec)
    name = ctypes.create_string_buffer(b"win_c")
    other = ctypes.create_string_buffer(b"other")
    calls.call("nvtxRangePushA", _Call(ctypes.addressof(name)))
    assert rec.window.open
    calls.call("nvtxRangePushA", _Call(ctypes.addressof(other)))  # nested, not of the window
    calls.call("nvtxRangePop", _Call())
    assert rec.window.open
    calls.call("nvtxRangePop", _Call())
    assert not rec.window.open
    calls.call("nvtxRangeStartA", _Call(ctypes.addressof(name), returned=77))
    assert rec.window.open
    calls.call("nvtxRangeEnd", _Call(76))  # another range's id
    assert rec.window.open
    calls.call("nvtxRangeEnd", _Call(77))
    assert not rec.window.open
    ascii_ = _Attributes(version=2, size=ctypes.sizeof(_Attributes), messageType=1, message=ctypes.addressof(name))
    calls.call("nvtxDomainRangePushEx", _Call(1234, ctypes.addressof(ascii_)))
    assert rec.window.open
    calls.call("nvtxDomainRangePop", _Call(1234))
    assert not rec.window.open
    calls.call("nvtxDomainRegisterStringA", _Call(1234, ctypes.addressof(name), returned=0xABC0))
    registered = _Attributes(version=2, size=ctypes.sizeof(_Attributes), messageType=3, message=0xABC0)
    calls.call("nvtxDomainRangeStartEx", _Call(1234, ctypes.addressof(registered), returned=5))
    assert rec.window.open
    calls.call("nvtxDomainRangeEnd", _Call(1234, 5))
    assert not rec.window.open
    unknown = _Attributes(version=2, size=ctypes.sizeof(_Attributes), messageType=3, message=0xDEAD0)
    calls.call("nvtxDomainRangePushEx", _Call(1234, ctypes.addressof(unknown)))  # registered before tracing
    assert not rec.window.open and rec.counters["nvtx_unnamed"] == 1
    calls.call("nvtxDomainRangePop", _Call(1234))
    assert len(rec.window.finish()) == 4
    rec.window.push("win_python")  # a binding that hands no data: the C push inside opens nothing, pops nothing of others
    calls.call("nvtxRangePushA", None)
    calls.call("nvtxRangePop", None)
    assert rec.window.open and rec.counters["nvtx_unreadable"] == 1
    rec.window.pop()
    assert not rec.window.open


def test_nvtx_calls_a_python_hook_makes_are_counted_once() -> None:
    from tracer.capture.callbacks import NvtxCalls

    rec = MemoryRecorder(ticking(), lambda i: None, lambda: None, devices=("cpu",), window=WindowSpec(glob="win*"))
    calls = NvtxCalls(rec)
    name = ctypes.create_string_buffer(b"win")

    class Real:
        def rangePushA(self, msg: str) -> int:  # torch's name: the C call CUPTI sees inside it
            calls.call("nvtxRangePushA", _Call(ctypes.addressof(name)))
            return 0

        def rangePop(self) -> int:  # torch's name
            calls.call("nvtxRangePop", _Call())
            return 0

    class TorchNvtx:
        _nvtx = Real()

    hook_torch_nvtx(rec.window, TorchNvtx)
    TorchNvtx._nvtx.rangePushA("win")
    assert rec.window.open and rec.window.depth == 1 and rec.counters["nvtx_calls"] == 0
    TorchNvtx._nvtx.rangePop()
    assert not rec.window.open and rec.window.depth == 0


def test_nvtx_domain_methods_open_the_window() -> None:
    """nvtx.Domain's methods call C directly: hooked on the class, keyword or attributes message."""
    made: list[str] = []

    class Registered:
        def __init__(self, text: str) -> None:
            self.string = text

    class Attributes:
        def __init__(self, text: str) -> None:
            self.message = Registered(text)

    class Domain:
        def push_range(self, attributes: object = None, **kwargs: object) -> None:
            made.append("push")

        def pop_range(self) -> None:
            made.append("pop")

        def start_range(self, attributes: object = None, **kwargs: object) -> int:
            made.append("start")
            return 9

        def end_range(self, rid: int) -> None:
            made.append(f"end {rid}")

    w = MemoryWindow(WindowSpec(glob="win*"), ticking())
    hook_nvtx_domain(w, Domain)
    d = Domain()
    d.push_range(message="win_push")
    assert w.open
    d.pop_range()
    assert not w.open
    d.push_range(Attributes("other"))
    assert not w.open
    d.pop_range()
    rid = d.start_range(Attributes("win_start"))
    assert w.open and rid == 9
    d.end_range(rid)
    assert not w.open and made == ["push", "pop", "push", "pop", "start", "end 9"]


def test_tensor_subclass_ops_are_recorded_on_their_inner_tensors() -> None:
    """A wrapper subclass (DTensor: FSDP2's parameters; here torch's own TwoTensor) has no storage of
    its own: the mode defers to its __torch_dispatch__ and records the ops it runs on the plain
    tensors inside, with their bytes (FSDP2's AdamW step was 36 kernels with no memory set before)."""
    torch = pytest.importorskip("torch")
    two_tensor = pytest.importorskip("torch.testing._internal.two_tensor")
    from tracer.capture import torch_mode

    rec = MemoryRecorder(time.perf_counter_ns, lambda i: None, lambda: None, devices=("cpu",))
    mode = torch_mode.make_mode(rec, torch)
    a, b = torch.ones(8), torch.ones(8)
    t = two_tensor.TwoTensor(a, b)
    with mode:
        t.mul_(3.0)
        torch._foreach_add_([t], 1.0)
    assert float(a[0]) == float(b[0]) == 4.0
    inner = {a.data_ptr(), b.data_ptr()}
    written = [(o.name, x.address) for o in rec.ops for x in rec.accesses if x.op_id == o.id and x.mode & Mode.WRITE]
    assert {addr for _, addr in written} == inner, written
    assert sum(1 for name, _ in written if name.startswith("aten::mul_")) == 2, written  # once per inner tensor
    assert sum(1 for name, _ in written if "foreach_add" in name) == 2, written


def test_fsdp2_optimizer_step_is_recorded_on_the_local_shards(tmp_path: Path) -> None:
    """FSDP2 on CPU (gloo, one rank): AdamW's foreach ops on the DTensor parameters are recorded on
    the local shards' bytes, as FSDP2 on the GPU needs them (its step's kernels had no memory set)."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    fsdp = pytest.importorskip("torch.distributed.fsdp")
    from tracer.capture import torch_mode

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
        fsdp.fully_shard(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
        rec = MemoryRecorder(time.perf_counter_ns, lambda i: None, lambda: None, devices=("cpu",))
        model(torch.randn(2, 8)).sum().backward()
        with torch_mode.make_mode(rec, torch):
            opt.step()
        shards = {p.to_local().data_ptr() for p in model.parameters()}
        steps = {o.id for o in rec.ops if "foreach" in o.name or "adamw" in o.name}
        written = {a.address for a in rec.accesses if a.op_id in steps and a.mode & Mode.WRITE}
        assert shards <= written, (shards, written, sorted({o.name for o in rec.ops}))
    finally:
        dist.destroy_process_group()
