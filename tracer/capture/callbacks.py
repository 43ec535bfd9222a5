"""CUPTI callback API for `--memory`: kernel launches outside any recorded op (their pointer-sized
arguments), copy and memset calls outside any op (their byte ranges: docs/operations.md), event
records, event/stream queries that returned success, the CUDA graph nodes launches and copies make
while their stream is captured (and the clones instantiation makes of them), the nodes and edges of
each instantiated graph, and the stream each graph launch goes to.

Layouts (CUPTI and driver headers; checked on an H200 with cupti-python 13.0): CUpti_CallbackData
has functionParams at +16 and functionReturnValue at +24; cuLaunchKernel_params: f +0,
kernelParams +48, extra +56; cuLaunchKernelEx_params: f +8, kernelParams +16, extra +24;
cu/cudaEventRecord: event +0; cu/cudaEventQuery: event +0; cu/cudaStreamQuery: stream +0.
Runtime launches arrive as nested driver launch callbacks with the same correlation id, so the
four driver launch APIs see every launch. A launch into a capturing stream makes its graph node
inside the launch call, on the launching thread (resource callback GRAPHNODE_CREATED between the
launch's enter and exit); instantiation clones every node (GRAPHNODE_CLONED: original -> clone),
and a graph launch's kernels carry the clone's id (graphNodeId). Every read is guarded: a failure
is counted, never raised into the program."""
from __future__ import annotations

import ctypes
import os
import re
import struct
import time
from collections.abc import Callable
from typing import Any

from tracer.capture.fastrecords import FastRecords
from tracer.capture.memory_recorder import MemoryRecorder
from tracer.capture.records import HostQueryKind, HostQueryRec, Mode

READ, WRITE = Mode.READ, Mode.WRITE

LAUNCH = {"cuLaunchKernel": False, "cuLaunchKernel_ptsz": False, "cuLaunchKernelEx": True, "cuLaunchKernelEx_ptsz": True}
EVENT_RECORD = ("cuEventRecord", "cuEventRecord_ptsz", "cuEventRecordWithFlags", "cuEventRecordWithFlags_ptsz",
                "cudaEventRecord", "cudaEventRecord_ptsz", "cudaEventRecordWithFlags", "cudaEventRecordWithFlags_ptsz")
EVENT_QUERY = ("cuEventQuery", "cudaEventQuery")
STREAM_QUERY = ("cuStreamQuery", "cuStreamQuery_ptsz", "cudaStreamQuery", "cudaStreamQuery_ptsz")
GRAPH_NODE = ("GRAPHNODE_CREATED", "GRAPHNODE_CLONED")  # resource callbacks, with the launch role
GRAPH_EXEC = "GRAPHEXEC_CREATED"  # resource callback: the instantiated graph's nodes and edges are read then
GRAPH_LAUNCH = ("cuGraphLaunch", "cuGraphLaunch_ptsz")  # params: hGraphExec +0, hStream +8
# Copy and memset APIs (named as api_name gives them: cuMemcpyHtoD_v2 is cuMemcpyHtoD) and where their
# params structs hold the bytes: 1D copies (runtime and driver, async or not: dst +0, src +8, count
# +16); peer copies (dst +0, src +16, count +32); memsets (dst +0, count +16; the driver's D16/D32
# count elements); 2D (runtime: dst +0, dpitch +8, src +16, spitch +24, width +32, height +40;
# driver: a CUDA_MEMCPY2D pointer at +0).
COPY_1D = ("cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpy_ptds", "cudaMemcpyAsync_ptsz", "cuMemcpy", "cuMemcpyAsync",
           "cuMemcpy_ptds", "cuMemcpyAsync_ptsz", "cuMemcpyHtoD", "cuMemcpyHtoDAsync", "cuMemcpyDtoH",
           "cuMemcpyDtoHAsync", "cuMemcpyDtoD", "cuMemcpyDtoDAsync", "cuMemcpyHtoD_v2_ptds",
           "cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyDtoH_v2_ptds", "cuMemcpyDtoHAsync_v2_ptsz", "cuMemcpyDtoD_v2_ptds",
           "cuMemcpyDtoDAsync_v2_ptsz")
COPY_PEER = ("cudaMemcpyPeer", "cudaMemcpyPeerAsync", "cuMemcpyPeer", "cuMemcpyPeerAsync", "cuMemcpyPeer_ptds",
             "cuMemcpyPeerAsync_ptsz")
COPY_2D_RUNTIME = ("cudaMemcpy2D", "cudaMemcpy2DAsync", "cudaMemcpy2D_ptds", "cudaMemcpy2DAsync_ptsz")
COPY_2D_DRIVER = ("cuMemcpy2D", "cuMemcpy2DAsync", "cuMemcpy2DUnaligned", "cuMemcpy2D_v2_ptds",
                  "cuMemcpy2DAsync_v2_ptsz", "cuMemcpy2DUnaligned_v2_ptds")
MEMSET = {"cudaMemset": 1, "cudaMemsetAsync": 1, "cudaMemset_ptds": 1, "cudaMemsetAsync_ptsz": 1, "cuMemsetD8": 1,
          "cuMemsetD8Async": 1, "cuMemsetD16": 2, "cuMemsetD16Async": 2, "cuMemsetD32": 4, "cuMemsetD32Async": 4,
          "cuMemsetD8_v2_ptds": 1, "cuMemsetD8Async_ptsz": 1, "cuMemsetD16_v2_ptds": 2, "cuMemsetD16Async_ptsz": 2,
          "cuMemsetD32_v2_ptds": 4, "cuMemsetD32Async_ptsz": 4}
# 3D copies: a pointer to the copy's parameters at +0. Runtime cudaMemcpy3DParms: srcArray +0, srcPos
# (x, y, z) +8, srcPtr (ptr, pitch, xsize, ysize) +32, dstArray +64, dstPos +72, dstPtr +96, extent
# (width, height, depth) +128; cudaMemcpy3DPeerParms: srcArray +0, srcPos +8, srcPtr +32, srcDevice +64,
# dstArray +72, dstPos +80, dstPtr +104, dstDevice +136, extent +144. Driver CUDA_MEMCPY3D (and
# CUDA_MEMCPY3D_PEER, the same offsets): per side at +0 (src) and +88 (dst): xInBytes +0, y +8, z +16,
# memoryType +32, host +40, device +48, array +56, pitch +72, height +80; WidthInBytes +176, Height +184,
# Depth +192.
COPY_3D_RUNTIME = {"cudaMemcpy3D": 0, "cudaMemcpy3DAsync": 0, "cudaMemcpy3D_ptds": 0, "cudaMemcpy3DAsync_ptsz": 0,
                   "cudaMemcpy3DPeer": 1, "cudaMemcpy3DPeerAsync": 1}
COPY_3D_DRIVER = ("cuMemcpy3D", "cuMemcpy3DAsync", "cuMemcpy3D_v2_ptds", "cuMemcpy3DAsync_v2_ptsz", "cuMemcpy3DPeer",
                  "cuMemcpy3DPeerAsync", "cuMemcpy3DPeer_ptds", "cuMemcpy3DPeerAsync_ptsz")
# Copies to or from CUDA arrays (opaque layouts, not linear memory): recorded as not judged, with the reason
COPY_ARRAY = ("cudaMemcpyToArray", "cudaMemcpyFromArray", "cudaMemcpyArrayToArray", "cudaMemcpy2DToArray",
              "cudaMemcpy2DFromArray", "cudaMemcpy2DArrayToArray", "cudaMemcpyToArrayAsync", "cudaMemcpyFromArrayAsync",
              "cudaMemcpy2DToArrayAsync", "cudaMemcpy2DFromArrayAsync", "cuMemcpyHtoA", "cuMemcpyAtoH", "cuMemcpyDtoA",
              "cuMemcpyAtoD", "cuMemcpyAtoA", "cuMemcpyHtoAAsync", "cuMemcpyAtoHAsync")
ARRAY_REASON = "a side is a CUDA array (opaque layout, not linear memory): not judged"
COPY_APIS = (COPY_1D + COPY_PEER + COPY_2D_RUNTIME + COPY_2D_DRIVER + tuple(COPY_3D_RUNTIME) + COPY_3D_DRIVER + COPY_ARRAY
             + tuple(MEMSET))
# NVTX calls (CUPTI's NVTX callback domain, with NVTX_INJECTION64_PATH at libcupti), for the memory
# capture window: CUpti_NvtxData is functionName +0, functionParams +8, functionReturnValue +16. The
# params (generated_nvtx_meta.h): the A/W forms a message pointer at +0, the Ex forms an
# nvtxEventAttributes_t pointer at +0, RangeEnd the id at +0; the nvtxDomain* forms the domain at +0
# and then the same at +8; RegisterStringA the string at +8 (its handle returned). nvtxEventAttributes_t:
# messageType +32 (1 ASCII, 2 wide, 3 registered), message +40. Callback ids: cupti_nvtx_cbid.h
# (asked of CUPTI by name first).
NVTX_CBIDS = {"nvtxRangeStartA": 4, "nvtxRangeStartW": 5, "nvtxRangeStartEx": 6, "nvtxRangeEnd": 7, "nvtxRangePushA": 8,
              "nvtxRangePushW": 9, "nvtxRangePushEx": 10, "nvtxRangePop": 11, "nvtxDomainRangeStartEx": 31,
              "nvtxDomainRangeEnd": 32, "nvtxDomainRangePushEx": 33, "nvtxDomainRangePop": 34,
              "nvtxDomainRegisterStringA": 39}
NVTX_ASCII, NVTX_WIDE, NVTX_REGISTERED = 1, 2, 3
MAX_PARAMS = 1024
MAX_PARAM_BYTES = 32768  # CUDA's kernel parameter limit (32764 bytes)
CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2
ENTER = 0

Layout = tuple[tuple[int, int], ...]  # (offset, size) per parameter


def u64(address: int) -> int:
    return ctypes.c_uint64.from_address(address).value


def i32(address: int) -> int:
    return ctypes.c_int32.from_address(address).value


def api_name(member: str) -> str:
    """Enum member -> API name: `cudaEventRecord_v3020` -> `cudaEventRecord`,
    `_runtime_api_trace_cbid__cudaLaunchKernel_v13000` -> `cudaLaunchKernel`."""
    name = member.split("__")[-1].lstrip("_")
    return re.sub(r"_v\d+$", "", name)


def cbids(enum_cls: Any, wanted: tuple[str, ...] | dict) -> dict[int, str]:
    out: dict[int, str] = {}
    for member in getattr(enum_cls, "__members__", {}):
        name = api_name(member)
        if name in wanted:
            out[int(getattr(enum_cls, member))] = name
    return out


def aligned_words(raw: bytes, first: int = 0) -> list[int]:
    """The 8-byte little-endian words of raw starting at byte `first`."""
    n = (len(raw) - first) // 8
    return list(struct.unpack_from(f"<{n}Q", raw, first)) if n > 0 else []


def argument_words(layout: Layout, kernel_params: int) -> list[int]:
    """Every 8-byte-aligned word of every argument at least 8 bytes long (pointers, and pointers
    inside structs passed by value); kernelParams[i] points at argument i's value."""
    words: list[int] = []
    total = 0
    for i, (offset, size) in enumerate(layout):
        if size < 8:
            continue
        total += size
        if total > MAX_PARAM_BYTES:
            break
        value = u64(kernel_params + 8 * i)
        if value:
            words += aligned_words(ctypes.string_at(value, size), (-offset) % 8)
    return words


def extra_words(extra: int) -> list[int] | None:
    """`extra` = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, END}."""
    buf = size = 0
    for i in range(0, 16, 2):
        key = u64(extra + 8 * i)
        if key == CU_LAUNCH_PARAM_END:
            break
        value = u64(extra + 8 * (i + 1))
        if key == CU_LAUNCH_PARAM_BUFFER_POINTER:
            buf = value
        elif key == CU_LAUNCH_PARAM_BUFFER_SIZE and value:
            size = u64(value)
    if not buf or not 0 < size <= MAX_PARAM_BYTES:
        return None
    return aligned_words(ctypes.string_at(buf, size))


def driver_param_layout(f: int) -> tuple[Layout | None, str]:
    """(layout, method) or (None, why): cuFuncGetParamInfo on a CUfunction; runtime and
    cuda.core launches pass library kernels (CUkernel), tried with cuKernelGetParamInfo, then
    through cuKernelGetFunction."""
    from cuda.bindings import driver as d

    def via_function(i: int) -> tuple:
        err, func = d.cuKernelGetFunction(d.CUkernel(f))
        return (err, 0, 0) if err != d.CUresult.CUDA_SUCCESS else d.cuFuncGetParamInfo(func, i)

    attempts: list[tuple[str, Callable[[int], tuple]]] = [
        ("cuFuncGetParamInfo", lambda i: d.cuFuncGetParamInfo(d.CUfunction(f), i)),
        ("cuKernelGetParamInfo", lambda i: d.cuKernelGetParamInfo(d.CUkernel(f), i)),
        ("cuKernelGetFunction", via_function),
    ]
    return walk_layouts(attempts, int(d.CUresult.CUDA_SUCCESS), int(d.CUresult.CUDA_ERROR_INVALID_VALUE))


def walk_layouts(attempts: list[tuple[str, Callable[[int], tuple]]], ok: int, past_end: int) -> tuple[Layout | None, str]:
    """Parameter i = 0, 1, ... until `past_end`; a method that fails on parameter 0 hands over to
    the next one, and only when all say `past_end` there does the kernel take no parameters."""
    reasons: list[str] = []
    empty = None
    for method, get in attempts:
        layout: list[tuple[int, int]] = []
        for i in range(MAX_PARAMS):
            try:
                err, offset, size = get(i)
            except Exception as exc:  # a binding without this call
                err, offset, size = f"{type(exc).__name__}: {exc}", 0, 0
            code = int(err) if not isinstance(err, str) else -1
            if code == ok:
                layout.append((int(offset), int(size)))
                continue
            if code == past_end and layout:
                return tuple(layout), method
            if code == past_end:
                empty = empty or method
            else:
                reasons.append(f"{method}: {err if isinstance(err, str) else code}")
            break
    if empty is not None and len(reasons) < len(attempts):
        return (), empty
    return None, "; ".join(reasons) or "no parameter info"


SITE_FIELDS = ("callback_site", "correlation_id")  # read from the CUpti_CallbackData struct (fastrecords.py)


def _site_slow(cbdata: Any) -> tuple[int, int]:
    return int(cbdata.callback_site), cbdata.correlation_id


WINDOWED = ("launch", "launch_ex", "copy")  # roles switched off outside the memory capture window
ROLE_APIS = {"launch": tuple(LAUNCH) + COPY_APIS + GRAPH_LAUNCH, "record": EVENT_RECORD, "query": EVENT_QUERY + STREAM_QUERY}
Access = tuple[int, int, int, int, str]  # (address, bytes, mode, exact, label)


def pitched(address: int, pitch: int, width: int, height: int, mode: int, label: str) -> Access:
    """A 2D region as the one byte range that holds it: exact when its rows are contiguous, else the
    gaps between rows are counted in (exact 0: a hazard found there is a `may`)."""
    if height <= 1 or pitch == width:
        return address, width * max(height, 1), mode, 1, label
    return address, pitch * (height - 1) + width, mode, 0, label


def pitched3d(address: int, pitch: int, rows: int, width: int, height: int, depth: int, mode: int, label: str) -> Access:
    """A 3D region (depth slices of `rows` rows of `pitch` bytes, `height` rows of `width` bytes
    copied in each) as the one byte range that holds it: exact when it is contiguous."""
    if depth <= 1:
        return pitched(address, pitch, width, height, mode, label)
    slice_ = pitch * rows
    if pitch == width and rows == height:
        return address, width * height * depth, mode, 1, label
    return address, slice_ * (depth - 1) + pitch * (max(height, 1) - 1) + width, mode, 0, label


def copy3d_runtime(params: int, peer: bool) -> list[Access] | None:
    """cudaMemcpy3D*(const cudaMemcpy3DParms *p) and the peer form; None: a side is a CUDA array."""
    p = u64(params)
    dst_at, extent_at = (72, 144) if peer else (64, 128)
    width, height, depth = u64(p + extent_at), u64(p + extent_at + 8), u64(p + extent_at + 16)
    out = []
    for at, mode, label in ((0, READ, "src"), (dst_at, WRITE, "dst")):
        if u64(p + at):  # srcArray / dstArray
            return None
        x, y, z = u64(p + at + 8), u64(p + at + 16), u64(p + at + 24)
        ptr, pitch, rows = u64(p + at + 32), u64(p + at + 40), u64(p + at + 56)
        out.append(pitched3d(ptr + (z * rows + y) * pitch + x, pitch, rows, width, height, depth, mode, label))
    return out


def copy3d_driver(params: int) -> list[Access] | None:
    """cuMemcpy3D*(const CUDA_MEMCPY3D *) and the peer form; None: a side is a CUDA array."""
    c = u64(params)
    width, height, depth = u64(c + 176), u64(c + 184), u64(c + 192)
    out = []
    for base, mode, label in ((c, READ, "src"), (c + 88, WRITE, "dst")):
        x, y, z, kind = u64(base), u64(base + 8), u64(base + 16), i32(base + 32)
        if kind == 3:  # CU_MEMORYTYPE_ARRAY
            return None
        ptr = u64(base + 40) if kind == 1 else u64(base + 48)  # host, else the device pointer
        pitch, rows = u64(base + 72), u64(base + 80)
        out.append(pitched3d(ptr + (z * rows + y) * pitch + x, pitch, rows, width, height, depth, mode, label))
    return out


def copy_accesses(name: str, params: int) -> list[Access] | None:
    """What a copy or memset API call reads and writes, from its params struct; None: it copies to
    or from a CUDA array (not judged)."""
    if name in COPY_ARRAY:
        return None
    if name in COPY_3D_RUNTIME:
        return copy3d_runtime(params, bool(COPY_3D_RUNTIME[name]))
    if name in COPY_3D_DRIVER:
        return copy3d_driver(params)
    if name in MEMSET:
        return [(u64(params), u64(params + 16) * MEMSET[name], WRITE, 1, "dst")]
    if name in COPY_2D_RUNTIME:
        dst, dpitch, src, spitch, width, height = (u64(params + 8 * i) for i in range(6))
        return [pitched(src, spitch, width, height, READ, "src"), pitched(dst, dpitch, width, height, WRITE, "dst")]
    if name in COPY_2D_DRIVER:
        c = u64(params)  # CUDA_MEMCPY2D: srcXInBytes, srcY, srcMemoryType, srcHost, srcDevice, srcArray, srcPitch, dst...
        out = []
        for base, mode, label in ((c, READ, "src"), (c + 56, WRITE, "dst")):
            x, y, kind, host, dev, pitch = u64(base), u64(base + 8), i32(base + 16), u64(base + 24), u64(base + 32), u64(base + 48)
            if kind == 3:  # CU_MEMORYTYPE_ARRAY: not a linear range
                return None
            ptr = host if kind == 1 else dev  # CU_MEMORYTYPE_HOST; DEVICE and UNIFIED use the device pointer
            out.append(pitched(ptr + y * pitch + x, pitch, u64(c + 112), u64(c + 120), mode, label))
        return out
    src_at, n_at = (16, 32) if name in COPY_PEER else (8, 16)
    n = u64(params + n_at)
    return [(u64(params + src_at), n, READ, 1, "src"), (u64(params), n, WRITE, 1, "dst")]


class ApiCallbacks:
    """One CUPTI subscriber for the launch, event-record and query APIs (`roles`: which of them)."""

    def __init__(self, cupti: Any, rec: MemoryRecorder,
                 param_layout: Callable[[int], tuple[Layout | None, str]] = driver_param_layout, *,
                 roles: tuple[str, ...] = tuple(ROLE_APIS), hook: list[float] | None = None) -> None:
        self.cupti, self.rec, self.param_layout = cupti, rec, param_layout
        self.wanted = tuple(name for role in roles for name in ROLE_APIS[role])
        self.hook = hook if hook is not None else [0, 0.0]  # [calls, seconds] (Timing)
        self.layouts: dict[int, tuple[Layout | None, str]] = {}
        self.roles: dict[tuple[int, int], tuple[str, str]] = {}
        self.enter_ts: dict[int, int] = {}
        self.subscriber: Any = None
        self.nvtx: NvtxCalls | None = None  # the capture window's NVTX calls (a window other than the whole run)
        self.raw: tuple[Any, Any] | None = None  # (libcupti, the C callback) when subscribed through ctypes
        self.fast = FastRecords(cupti, lambda where, exc: self.rec.counters.update({f"slow_reads_{where}": 1}))

    def subscribe(self) -> None:
        c = self.cupti
        drv, rt = int(c.CallbackDomain.DRIVER_API), int(c.CallbackDomain.RUNTIME_API)
        for domain, enum_cls in ((drv, c.driver_api_trace_cbid), (rt, c.runtime_api_trace_cbid)):
            for cbid, name in cbids(enum_cls, self.wanted).items():
                self.roles[(domain, cbid)] = (self._role(name), name)
        if any(name in LAUNCH for name in self.wanted):
            self._graph_roles()
        if not self.rec.window.spec.whole_run:
            self._nvtx_roles()
        self.last_copy = 0  # the copy call being recorded: a runtime copy arrives again as its driver call
        self.subscriber = self._subscribe_raw() if self.nvtx is not None else None
        if self.subscriber is None:
            self.subscriber = c.subscribe(self.callback, None)
        for domain, cbid in self.roles:
            try:
                c.enable_callback(1, self.subscriber, domain, cbid)
            except Exception as exc:
                self.rec.count_error(f"enable_callback_{domain}_{cbid}", exc)
        window = self.rec.window
        if not window.spec.whole_run:
            window.listeners.append(self.window_changed)
            if not window.open:
                self.window_changed(False)

    def window_changed(self, is_open: bool) -> None:
        """Outside the memory capture window CUPTI calls no Python on launches and copies (the
        callbacks check the window too, should switching fail)."""
        for (domain, cbid), (role, _) in self.roles.items():
            if role in WINDOWED:
                try:
                    self.cupti.enable_callback(int(is_open), self.subscriber, domain, cbid)
                except Exception as exc:
                    self.rec.count_error("window_callbacks", exc)

    def _graph_roles(self) -> None:
        try:
            resource, ids = int(self.cupti.CallbackDomain.RESOURCE), self.cupti.CallbackIdResource
            for name in GRAPH_NODE:
                self.roles[(resource, int(getattr(ids, name)))] = ("graph", name)
            if hasattr(ids, GRAPH_EXEC):  # else graphs' edges stay unknown: their branches are counted as not judged
                self.roles[(resource, int(getattr(ids, GRAPH_EXEC)))] = ("graph_exec", GRAPH_EXEC)
        except Exception as exc:  # a binding without resource callbacks: graph replays stay without memory sets
            self.rec.count_error("graph_callbacks", exc)

    def _nvtx_roles(self) -> None:
        """The NVTX range calls, for the capture window (ids asked of CUPTI by name, else the header's)."""
        try:
            domain = int(self.cupti.CallbackDomain.NVTX)
        except Exception as exc:  # a binding without the NVTX domain: the Python hooks only
            self.rec.count_error("nvtx_callbacks", exc)
            return
        found: dict[int, str] = {}
        for cbid in range(1, 64):
            try:
                name = str(self.cupti.get_callback_name(domain, cbid))
            except Exception:
                continue
            if name in NVTX_CBIDS:
                found[cbid] = name
        for cbid, name in (found or {v: k for k, v in NVTX_CBIDS.items()}).items():
            self.roles[(domain, cbid)] = ("nvtx", name)
        self.nvtx = NvtxCalls(self.rec)

    def _subscribe_raw(self) -> int | None:
        """cupti-python 13.0 calls a Python callback with None for an NVTX call's data: with a capture
        window, the one subscriber is CUPTI's own C callback (ctypes), handing the same objects on
        (CallbackData, ResourceData from their pointers) and the NVTX data's address. None: not
        possible here (cupti-python's subscriber then, C ranges counted as unreadable)."""
        c = self.cupti
        try:
            lib = loaded_libcupti()
            api, resource = c.CallbackData.from_ptr, c.ResourceData.from_ptr
            wrap = {int(c.CallbackDomain.DRIVER_API): api, int(c.CallbackDomain.RUNTIME_API): api,
                    int(c.CallbackDomain.RESOURCE): resource, int(c.CallbackDomain.NVTX): int}
        except Exception as exc:
            self.rec.count_error("raw_subscribe", exc)
            return None
        if lib is None:
            self.rec.counters["raw_subscribe_no_libcupti"] += 1
            return None
        handle = self.callback

        def raw(userdata: Any, domain: int, cbid: int, cbdata: Any) -> None:
            made = wrap.get(domain)
            if made is not None and cbdata:
                try:
                    data = made(cbdata)
                except Exception as exc:  # never into the program
                    self.rec.count_error("raw_callback", exc)
                    return
                handle(None, domain, cbid, data)

        fn = CUPTI_CALLBACK(raw)
        out = ctypes.c_void_p()
        code = lib.cuptiSubscribe(ctypes.byref(out), fn, None)
        if code != 0 or not out.value:
            self.rec.counters[f"raw_subscribe_error_{code}"] += 1
            return None
        self.raw = (lib, fn)  # the C callback must outlive the subscription
        return out.value

    @staticmethod
    def _role(name: str) -> str:
        if name in LAUNCH:
            return "launch_ex" if LAUNCH[name] else "launch"
        if name in EVENT_RECORD:
            return "record"
        if name in COPY_APIS:
            return "copy"
        if name in GRAPH_LAUNCH:
            return "graph_launch"
        return "event_query" if name in EVENT_QUERY else "stream_query"

    def unsubscribe(self) -> None:
        if self.window_changed in self.rec.window.listeners:
            self.rec.window.listeners.remove(self.window_changed)
        if self.subscriber is not None:
            if self.raw is not None:
                self.raw[0].cuptiUnsubscribe(ctypes.c_void_p(self.subscriber))
            else:
                self.cupti.unsubscribe(self.subscriber)
            self.subscriber = None

    def callback(self, userdata: Any, domain: int, cbid: int, cbdata: Any) -> None:
        t0 = time.perf_counter()
        try:
            role, name = self.roles[(int(domain), int(cbid))]
            if role[0] == "l":  # launch, launch_ex: the hot path
                site, corr = self.fast.read(cbdata, SITE_FIELDS, _site_slow)
                tls = self.rec.tls
                if site != ENTER:
                    tls.launch = 0
                    return
                tls.launch = corr
                if not tls.depth and self.rec.window.open:
                    self.on_launch(role == "launch_ex", cbdata)
            elif role == "record":
                self.on_record(cbdata)
            elif role == "graph":
                self.on_graph_node(name, cbdata)
            elif role == "copy":
                self.on_copy(name, cbdata)
            elif role == "graph_launch":
                self.on_graph_launch(name, cbdata)
            elif role == "graph_exec":
                self.on_graph_exec(cbdata)
            elif role == "nvtx" and self.nvtx is not None:
                self.nvtx.call(name, cbdata)
            else:
                self.on_query(role, name, cbdata)
        except Exception as exc:  # never into the program
            self.rec.count_error("api_callback", exc)
        finally:
            hook = self.hook
            hook[0] += 1
            hook[1] += time.perf_counter() - t0

    def on_graph_node(self, name: str, cbdata: Any) -> None:
        c = self.cupti
        g = c.GraphData.from_ptr(int(cbdata.resource_descriptor))
        node = int(c.get_graph_node_id(g.node))
        if name == "GRAPHNODE_CLONED":
            self.rec.graph_node(node, -1, int(c.get_graph_node_id(g.original_node)))
        elif self.rec.tls.launch:
            self.rec.graph_node(node, self.rec.tls.launch, -1)

    def on_copy(self, name: str, cbdata: Any) -> None:
        """A copy or memset: a graph node it makes (into a capturing stream) is tied to it, as a
        launch's is; outside any recorded op its own arguments say what it touches (inside one, the
        op's tensors do)."""
        tls = self.rec.tls
        if cbdata.callback_site != ENTER:
            tls.launch = 0
            return
        corr = cbdata.correlation_id
        tls.launch = corr
        if tls.depth or corr == self.last_copy or not self.rec.window.open:
            return
        self.last_copy = corr
        found = copy_accesses(name, u64(int(cbdata.ptr) + 16))
        if found is None:
            self.rec.unknown_launch(corr, name, ARRAY_REASON)
        else:
            self.rec.copy_args(corr, name, found)

    def on_graph_launch(self, name: str, cbdata: Any) -> None:
        if cbdata.callback_site == ENTER:
            params = u64(int(cbdata.ptr) + 16)
            self.rec.graph_launch(cbdata.correlation_id, self._stream_id(cbdata, u64(params + 8), name))

    def on_graph_exec(self, cbdata: Any) -> None:
        """An instantiated graph: its nodes and edges (original node ids; a graph launch's
        operations carry clones of them), so its branches are judged against its own edges."""
        c = self.cupti
        g = c.GraphData.from_ptr(int(cbdata.resource_descriptor))
        found = graph_structure(int(g.graph))
        if found is None:
            self.rec.counters["graph_edges_unreadable"] += 1
            return
        nodes, edges = found
        ids = {h: int(c.get_graph_node_id(h)) for h in nodes}
        self.rec.graph_edges([(ids[h], ids[h]) for h in nodes] + [(ids[a], ids[b]) for a, b in edges if a in ids and b in ids])

    def on_launch(self, ex: bool, cbdata: Any) -> None:
        params = u64(int(cbdata.ptr) + 16)
        f, kp, extra = (u64(params + 8), u64(params + 16), u64(params + 24)) if ex else \
            (u64(params), u64(params + 48), u64(params + 56))
        corr, name = cbdata.correlation_id, cbdata.symbol_name or "?"
        if kp:
            layout, how = self.layouts.get(f) or self.layouts.setdefault(f, self.param_layout(f))
            self.rec.counters[f"paraminfo_{how if layout is not None else 'failed'}"] += 1
            if layout is None:
                self.rec.unknown_launch(corr, name, f"parameter layout unavailable ({how})")
                return
            words = argument_words(layout, kp)
        elif extra:
            found = extra_words(extra)
            if found is None:
                self.rec.unknown_launch(corr, name, "extra argument buffer unreadable")
                return
            words = found
        else:
            words = []
        self.rec.launch_args(corr, name, words)

    def _returned(self, cbdata: Any) -> int:
        rv = u64(int(cbdata.ptr) + 24)
        return i32(rv) if rv else -1

    def on_record(self, cbdata: Any) -> None:
        if cbdata.callback_site != ENTER and self._returned(cbdata) == 0:
            self.rec.event_recorded(u64(u64(int(cbdata.ptr) + 16)), cbdata.correlation_id)

    def on_query(self, role: str, name: str, cbdata: Any) -> None:
        corr = cbdata.correlation_id
        if cbdata.callback_site == ENTER:
            self.enter_ts.setdefault(corr, self.rec.clock())
            return
        start = self.enter_ts.pop(corr, None)
        if self._returned(cbdata) != 0:
            return
        now = self.rec.clock()
        handle = u64(u64(int(cbdata.ptr) + 16))
        if role == "event_query":
            q = HostQueryRec(corr, HostQueryKind.EVENT, self.rec.event_records.get(handle, -1), -1, start or now, now,
                             self.rec.thread_id())
        else:
            q = HostQueryRec(corr, HostQueryKind.STREAM, -1, self._stream_id(cbdata, handle, name), start or now, now,
                             self.rec.thread_id())
        self.rec.query_done(q)

    def _stream_id(self, cbdata: Any, handle: int, name: str) -> int:
        try:
            return int(self.cupti.get_stream_id_ex(cbdata.context, handle, int(name.endswith("_ptsz"))))
        except Exception as exc:
            self.rec.count_error("stream_id", exc)
            return -1


CUPTI_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


def loaded_libcupti() -> Any:
    """The libcupti this process already loaded (cupti-python's), None when not exactly one is."""
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip()
            if "/libcupti.so" in path:
                paths.add(path)
    if len(paths) != 1:
        return None
    lib = ctypes.CDLL(paths.pop(), mode=os.RTLD_NOLOAD)
    lib.cuptiSubscribe.argtypes = [ctypes.POINTER(ctypes.c_void_p), CUPTI_CALLBACK, ctypes.c_void_p]
    lib.cuptiUnsubscribe.argtypes = [ctypes.c_void_p]
    return lib


def raw_pointer(cbdata: Any) -> int:
    """The callback data's own address, whatever object the binding wrapped it in (0: none given)."""
    if cbdata is None:
        return 0
    return cbdata if isinstance(cbdata, int) else int(cbdata.ptr)


def nvtx_message(attributes: int, registered: dict[int, str]) -> str | None:
    """An nvtxEventAttributes_t's message (None: no message, or a handle registered before tracing)."""
    if not attributes:
        return None
    kind, message = i32(attributes + 32), u64(attributes + 40)
    if not message:
        return None
    if kind == NVTX_ASCII:
        return ctypes.string_at(message).decode("utf-8", "replace")
    if kind == NVTX_WIDE:
        return ctypes.wstring_at(message)
    return registered.get(message) if kind == NVTX_REGISTERED else None


class NvtxCalls:
    """NVTX range calls seen through CUPTI: they open and close the capture window like the Python
    hooks' (window.py), except those a Python hook is making (already counted there). A range
    whose name cannot be read opens nothing: what runs inside it stays outside the window, counted
    as not judged. Start/end ranges are matched by the id the start returned."""

    def __init__(self, rec: MemoryRecorder) -> None:
        self.rec, self.window = rec, rec.window
        self.registered: dict[int, str] = {}  # nvtxStringHandle_t -> its text
        self.starts: dict[int, int] = {}  # range id -> 1 when it opened the window

    def call(self, name: str, cbdata: Any) -> None:
        window = self.window
        if window.hooked():
            return
        self.rec.counters["nvtx_calls"] += 1
        if name.endswith("Pop"):
            window.pop()
            return
        raw = raw_pointer(cbdata)
        if not raw:  # a binding that hands no data: the range opens nothing, the stack stays balanced
            self.rec.counters["nvtx_unreadable"] += 1
            if "Push" in name:
                window.push(None)
            return
        params, returned = u64(raw + 8), u64(raw + 16)
        at = params + 8 if name.startswith("nvtxDomain") else params
        if name.endswith("End"):
            self.window.end(self.starts.pop(u64(at), 0))
        elif name == "nvtxDomainRegisterStringA":
            if returned and u64(returned) and u64(at):
                self.registered[u64(returned)] = ctypes.string_at(u64(at)).decode("utf-8", "replace")
        else:
            text = self._message(name, u64(at))
            if text is None:
                self.rec.counters["nvtx_unnamed"] += 1
            if "Push" in name:
                window.push(text)
                return
            rid = u64(returned) if returned else 0
            if rid:
                self.starts[rid] = window.start(text)
            else:
                self.rec.counters["nvtx_start_id_unread"] += 1

    def _message(self, name: str, pointer: int) -> str | None:
        if not pointer:
            return None
        if name.endswith("A"):
            return ctypes.string_at(pointer).decode("utf-8", "replace")
        if name.endswith("W"):
            return ctypes.wstring_at(pointer)
        return nvtx_message(pointer, self.registered)


_LIBCUDA: list[Any] = []


def graph_structure(graph: int) -> tuple[list[int], list[tuple[int, int]]] | None:
    """(node handles, edges from -> to) of a CUgraph through the driver (cuGraphGetNodes,
    cuGraphGetEdges_v2 or the older cuGraphGetEdges); None when they cannot be read."""
    if not _LIBCUDA:
        _LIBCUDA.append(ctypes.CDLL("libcuda.so.1"))
    cuda = _LIBCUDA[0]
    handle = ctypes.c_void_p(graph)
    n = ctypes.c_size_t(0)
    if cuda.cuGraphGetNodes(handle, None, ctypes.byref(n)) != 0:
        return None
    nodes = (ctypes.c_uint64 * max(n.value, 1))()
    if cuda.cuGraphGetNodes(handle, nodes, ctypes.byref(n)) != 0:
        return None
    v2 = getattr(cuda, "cuGraphGetEdges_v2", None)

    def edges(a: Any, b: Any, count: Any) -> int:
        return v2(handle, a, b, None, count) if v2 is not None else cuda.cuGraphGetEdges(handle, a, b, count)

    m = ctypes.c_size_t(0)
    if edges(None, None, ctypes.byref(m)) != 0:
        return None
    a, b = (ctypes.c_uint64 * max(m.value, 1))(), (ctypes.c_uint64 * max(m.value, 1))()
    if m.value and edges(a, b, ctypes.byref(m)) != 0:
        return None
    return list(nodes[:n.value]), list(zip(a[:m.value], b[:m.value]))
