"""The PyTorch side of `--memory`: a TorchDispatchMode entered when torch is imported (an import
hook: no process imports torch because of tracer), recording each op's tensors as byte ranges of
the storage they view, read or written as the op schema says (`Tensor(a!)` arguments and outputs
written, other tensor arguments read), plus the caching allocator's allocation and free reports.

Per op: one external correlation id pushed around the call (CUPTI joins every API call made inside
to it), two clock reads, a bounded frame scan for the first user frame, and a few attribute reads
per tensor. Pure view ops (no kernels) pass straight through. The time spent here (around each
op, not in it) is counted into the process's timing (hook "dispatch")."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from operator import attrgetter
from types import FrameType, ModuleType
from typing import Any

from tracer.capture.memory_recorder import MemoryRecorder
from tracer.capture.records import AccessRec, Mode, OpKind, OpRec
from tracer.capture.timing import Timing

FRAME_SCAN = 24  # frames looked at for the first user frame
# Ops that copy between host and device: their pinned host tensors take part (a non_blocking copy
# from or into pinned memory runs while the host goes on; a D2H copy into it is a write of that range)
HOST_COPY_OPS = frozenset({"aten::copy_", "aten::_to_copy", "aten::_copy_from", "aten::_copy_from_and_resize",
                           "aten::index_put_", "aten::index_copy_"})
# Collectives through the dispatcher: the NCCL kernels (and copies) they launch get their tensors. c10d's
# schemas mark nothing as written: a collective writes its outputs (`output_tensors`, `outputs`, ...)
# and reads and writes its in-place `tensors` (allreduce_, broadcast_, recv_, ...); send only reads.
C10D = "c10d::"
C10D_READ_ONLY = frozenset({"c10d::send"})
NO_NODE = 2**63  # backward node sequence numbers at or above this (AccumulateGrad: 2**64-1) are not forward ops
_TRACER_CAPTURE = os.path.dirname(os.path.abspath(__file__))
_STDLIB = sysconfig.get_paths().get("stdlib", "\0")


@dataclass(frozen=True, kw_only=True)
class OpInfo:
    name: str
    skip: bool  # a pure view: aliases its input, writes nothing, launches no kernel
    arg_names: tuple[str, ...]
    writes: frozenset[str]
    updates: frozenset[str] = frozenset()  # read and written (a collective's in-place `tensors`)
    modes: tuple[int, ...] = ()  # the access mode of each argument, in schema order
    host_copy: bool = False  # pinned host tensors take part (HOST_COPY_OPS)

    def mode_of(self, name: str) -> int:
        if name in self.writes:
            return Mode.READ_WRITE if name in self.updates else Mode.WRITE
        return Mode.READ


def op_info(func: Any) -> OpInfo:
    schema = func._schema
    args = tuple(a.name for a in schema.arguments)
    writes = frozenset(a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write)
    name = func.name()
    updates: frozenset[str] = frozenset()
    if name.startswith(C10D) and name not in C10D_READ_ONLY:
        updates = frozenset(a for a in args if a == "tensors")
        writes |= frozenset(a for a in args if a.startswith("output")) | updates
    returns = list(schema.returns)
    view = bool(returns) and not writes and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)
    info = OpInfo(name=name, skip=view, arg_names=args, writes=writes, updates=updates, host_copy=name in HOST_COPY_OPS)
    return replace(info, modes=tuple(info.mode_of(a) for a in args))


def _is_library(filename: str) -> bool:
    if filename.startswith(("<frozen", _TRACER_CAPTURE)) or "/torch/" in filename:
        return True
    return filename.startswith(_STDLIB) and "-packages" not in filename


def _on_device(devices: frozenset[str]) -> Callable[[Any], bool]:
    """Is a tensor on a recorded device: one attribute read for one device (Tensor.device builds an object)."""
    if devices == {"cuda"}:
        return attrgetter("is_cuda")
    if devices == {"cpu"}:
        return attrgetter("is_cpu")
    return lambda t: t.device.type in devices


class Extractor:
    """Tensors of one op -> accesses; the allocation instance from the storage identity."""

    def __init__(self, rec: MemoryRecorder, tensor_type: type) -> None:
        self.rec = rec
        self.tensor_type = tensor_type
        self.on_device = _on_device(rec.devices)
        self.library: dict[Any, bool] = {}
        self.sites: dict[tuple[Any, int], str] = {}  # (code, last instruction) -> "file:line"

    def callsite(self, depth: int = 3) -> str | None:
        """file:line of the first frame outside torch, the standard library and tracer's capture
        code, from `depth` frames up (the op's caller)."""
        f: FrameType | None = sys._getframe(depth)
        library = self.library
        for _ in range(FRAME_SCAN):
            if f is None:
                return None
            code = f.f_code
            lib = library.get(code)
            if lib is None:
                lib = library[code] = _is_library(code.co_filename)
            if not lib:
                key = (code, f.f_lasti)
                site = self.sites.get(key)
                if site is None:
                    site = self.sites[key] = f"{code.co_filename}:{f.f_lineno}"
                return site
            f = f.f_back
        return None

    def accesses(self, info: OpInfo, args: tuple, kwargs: dict, out: Any, t0: int,
                 where: str | None) -> dict[tuple[int, int], list]:
        """(address, bytes) -> [mode, allocation id, label]; a range seen twice ORs its modes."""
        found: dict[tuple[int, int], list] = {}
        tensor, add = self.tensor_type, self._tensor
        for a, mode, name in zip(args, info.modes, info.arg_names):
            if isinstance(a, tensor):
                add(found, a, mode, name, info, t0, where)
            elif isinstance(a, (list, tuple)):
                for v in a:
                    if isinstance(v, tensor):
                        add(found, v, mode, name, info, t0, where)
        for i in range(len(info.arg_names), len(args)):  # beyond the schema (never seen): read
            self._value(found, args[i], Mode.READ, f"arg {i}", info, t0, where)
        for name, a in kwargs.items():
            self._value(found, a, info.mode_of(name), name, info, t0, where)
        if isinstance(out, tensor):
            add(found, out, Mode.WRITE, "out 0", info, t0, where)
        elif isinstance(out, (tuple, list)):
            for i, o in enumerate(out):
                self._value(found, o, Mode.WRITE, f"out {i}", info, t0, where)
        return found

    def _value(self, found: dict, value: Any, mode: int, label: str, info: OpInfo, t0: int, where: str | None) -> None:
        if isinstance(value, self.tensor_type):
            self._tensor(found, value, mode, label, info, t0, where)
        elif isinstance(value, (list, tuple)):
            for v in value:
                if isinstance(v, self.tensor_type):
                    self._tensor(found, v, mode, label, info, t0, where)

    def _tensor(self, found: dict, t: Any, mode: int, label: str, info: OpInfo, t0: int, where: str | None) -> None:
        if not self.on_device(t):
            if not (info.host_copy and t.device.type == "cpu" and t.is_pinned()):
                return
        try:
            address = t.data_ptr()
            if t.is_contiguous():
                length = t.nbytes
                if not length:
                    return
            else:
                span = 1
                for n, stride in zip(t.shape, t.stride()):
                    if n == 0:
                        return
                    if n > 1:
                        span += (n - 1) * stride
                length = span * t.itemsize
            rec = self.rec
            # the allocator reports frees: the instance live at the storage's base is this storage's,
            # found without building a storage object (the costly part of a tensor)
            known = rec.live.get(address - t.storage_offset() * t.itemsize) if rec.frees_seen else None
            if known is not None:
                alloc, end = known.id, known.address + known.bytes
            else:
                st = t.untyped_storage()
                base, nbytes = st.data_ptr(), st.nbytes()
                alloc = rec.instance(base, st._cdata, nbytes, t.get_device(), t0, (info.name, label, where))
                end = base + nbytes
            if length > end - address:
                length = end - address
        except Exception as exc:  # fake, meta or storage-less tensors: counted, the op keeps its other tensors
            self.rec.count_error("tensor", exc)
            return
        key = (address, length)
        seen = found.get(key)
        if seen is None:
            found[key] = [mode, alloc, label]
        else:
            seen[0] |= mode


WRAPPER, OTHER = 1, 2  # tensor subclasses, as the mode treats them (make_mode)


def make_mode(rec: MemoryRecorder, torch: ModuleType, timing: Timing | None = None) -> Any:
    """The mode instance (its class needs torch, so it is built here)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    get_seq = torch._C._autograd._get_sequence_nr
    current_node = getattr(torch._C, "_current_autograd_node", lambda: None)
    extractor = Extractor(rec, torch.Tensor)
    callsite, accesses = extractor.callsite, extractor.accesses
    new, TORCH = tuple.__new__, OpKind.TORCH
    infos: dict[Any, OpInfo] = {}
    tls = rec.tls
    hook = (timing or Timing()).hook("dispatch")
    clock = time.perf_counter
    window = rec.window
    disabled = getattr(torch._C, "_disabled_torch_dispatch_impl", None)
    subclasses: dict[type, int] = {}

    def subclass(t: type) -> int:
        """0: a plain tensor or Parameter; WRAPPER: a traceable wrapper subclass (DTensor: FSDP2's
        parameters), no storage of its own, running the op on the plain tensors it holds; OTHER: a
        subclass with its own __torch_dispatch__ and no inner tensors (FakeTensor under DTensor's
        sharding propagation): run unrecorded (a kernel it launches is matched by its arguments)."""
        found = subclasses.get(t)
        if found is None:
            own = getattr(t, "__torch_dispatch__", disabled) is not disabled
            found = subclasses[t] = 0 if not own else WRAPPER if hasattr(t, "__tensor_flatten__") else OTHER
        return found

    fake_key = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "FAKE", None)
    get_mode = getattr(torch._C, "_get_dispatch_mode", None)
    faking = (lambda: get_mode(fake_key) is not None) if fake_key is not None and get_mode is not None else (lambda: False)

    def dispatch(self: Any, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kind = max(subclass(t) for t in types) if types else 0
        if kind == OTHER or faking():  # faking: a FakeTensorMode below (DTensor's sharding propagation), no real bytes
            return func(*args, **kwargs) if kwargs else func(*args)
        if kind == WRAPPER:
            return NotImplemented  # the subclass runs it: its ops on the plain tensors inside come back here
        if not window.open:  # outside the capture window: the op runs as untraced (its sequence number kept)
            tls.last_seq = get_seq()
            return func(*args, **kwargs) if kwargs else func(*args)
        t0 = clock()
        info = infos.get(func)
        if info is None:
            info = infos[func] = op_info(func)
        seq = get_seq()
        last, tls.last_seq = tls.last_seq, seq
        if info.skip:
            out = func(*args, **kwargs) if kwargs else func(*args)
            if seq != last:  # a view that created an autograd node: its backward ops point at it
                node_only(info, args, seq - 1)
            hook[0] += 1
            hook[1] += clock() - t0
            return out
        oid, c0 = rec.begin()
        t1 = clock()
        try:
            out = func(*args, **kwargs) if kwargs else func(*args)
        finally:
            c1 = rec.end()
        t2 = clock()
        try:
            node = current_node()
            bwd = node._sequence_nr() if node is not None else -1
            record(info, oid, args, kwargs, out, c0, c1, seq - 1 if seq != last else -1, bwd if 0 <= bwd < NO_NODE else -1)
        except Exception as exc:  # never into the program
            rec.count_error("torch_op", exc)
        hook[0] += 1
        hook[1] += clock() - t2 + t1 - t0  # tracer's own time around the op, not the op's
        return out

    class TracerMemoryMode(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls) -> bool:
            """torch.compile compiles as without tracer (an active mode would make it run eagerly);
            the compiled kernels are launches outside ops, matched by their arguments."""
            return True

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            """torch would wrap __torch_dispatch__ in Dynamo's `disable`, importing torch._dynamo
            (seconds) at the first op of a program that never compiles: keep_dynamo_out does it
            only once the program imports Dynamo itself (no frame can be compiled before)."""
            return False

        __torch_dispatch__ = dispatch

    def node_only(info: OpInfo, args: tuple, seq: int) -> None:
        try:
            if args and isinstance(args[0], torch.Tensor) and args[0].device.type in rec.devices:
                now = rec.clock()
                rec.ops.append(OpRec(next(rec.ids), OpKind.TORCH, info.name, rec.thread_id(), now, now, seq, -1, None, None))
        except Exception as exc:
            rec.count_error("view_op", exc)

    def record(info: OpInfo, oid: int, args: tuple, kwargs: dict | None, out: Any, t0: int, t1: int, seq: int, bwd: int) -> None:
        where = callsite()
        found = accesses(info, args, kwargs or {}, out, t0, where)
        if not found:
            return  # no tensor on a recorded device: not an op of interest
        # tuple.__new__ builds the records without their Python-level __new__ (a third of the cost)
        rec.ops.append(new(OpRec, (oid, TORCH, info.name, tls.tid or rec.thread_id(), t0, t1, seq, bwd, None, where)))
        rec.accesses.extend([new(AccessRec, (oid, a, n, m, 1, alloc, label)) for (a, n), (m, alloc, label) in found.items()])

    keep_dynamo_out(TracerMemoryMode, dispatch, timing)
    return TracerMemoryMode()


def keep_dynamo_out(mode_cls: type, dispatch: Callable[..., Any], timing: Timing | None) -> None:
    """Once torch._dynamo is imported (now, or when the program imports it), the mode's dispatch
    runs under Dynamo's `disable`, as torch does for every mode: a compiled region's eager
    fallback never traces into it."""
    def wrap(dynamo: ModuleType) -> None:
        if timing is not None:
            timing.mark("torch_dynamo_imported")
        mode_cls.__torch_dispatch__ = dynamo.disable(dispatch, recursive=True)  # type: ignore[attr-defined]  # torch stubs do not declare __torch_dispatch__ on the mode class

    loaded = sys.modules.get("torch._dynamo")
    if loaded is not None and hasattr(loaded, "disable"):
        wrap(loaded)
    else:
        sys.meta_path.insert(0, PostImport("torch._dynamo", wrap))


def hook_allocator(rec: MemoryRecorder, torch: ModuleType, timing: Timing | None = None) -> bool:
    """torch's GPU trace hooks report the caching allocator's allocations and frees, so a block
    handed out again is a new allocation instance. They cost a Python call per allocation."""
    from torch.cuda import _gpu_trace

    hook = (timing or Timing()).hook("allocator")
    _gpu_trace.register_callback_for_memory_allocation(_guarded(rec, rec.on_alloc, "on_alloc", hook))
    _gpu_trace.register_callback_for_memory_deallocation(_guarded(rec, rec.on_free, "on_free", hook))
    torch._C._activate_gpu_trace()
    return True


def _guarded(rec: MemoryRecorder, fn: Callable[[int], None], where: str, hook: list[float]) -> Callable[[int], None]:
    def call(address: int) -> None:
        t0 = time.perf_counter()
        try:
            fn(address)
        except Exception as exc:
            rec.count_error(where, exc)
        hook[0] += 1
        hook[1] += time.perf_counter() - t0

    return call


def start_recording(rec: MemoryRecorder, torch: ModuleType, *, dispatch: bool = True, allocator: bool = True,
                    timing: Timing | None = None) -> Any:
    """Enter the mode on this thread (the importing one; autograd's worker threads inherit it) and
    hook the caching allocator's reports; each part can be left out (the overhead benchmark)."""
    mode = None
    if dispatch:
        mode = make_mode(rec, torch, timing)
        # this thread's autograd sequence number now, so that its first op counts as creating a node
        # only if it moves the number (autograd may have run before: a test, a later window)
        rec.tls.last_seq = torch._C._autograd._get_sequence_nr()
        mode.__enter__()
    if allocator and "cuda" in rec.devices:
        try:
            rec.frees_seen = hook_allocator(rec, torch, timing)
        except Exception as exc:  # instances then split on storage identity only
            rec.count_error("allocator_hooks", exc)
    return mode


def activate_at_cuda_init(torch: ModuleType, activate: Callable[[], None]) -> bool:
    """Call `activate` just before torch initialises CUDA (torch.cuda._lazy_init calls
    torch._C._cuda_init by attribute, whichever module imported _lazy_init). False: this torch has
    no CUDA (nothing to wait for)."""
    original = getattr(torch._C, "_cuda_init", None)
    if original is None:
        return False

    def _cuda_init(*args: Any, **kwargs: Any) -> Any:
        torch._C._cuda_init = original
        activate()
        return original(*args, **kwargs)

    torch._C._cuda_init = _cuda_init
    return True


def after_device_sync(torch: ModuleType, then: Callable[[], None]) -> bool:
    """Call `then` after each torch.cuda.synchronize() returns (it calls torch._C._cuda_synchronize
    by attribute, however the program imported it). False: this torch has no CUDA."""
    original = getattr(torch._C, "_cuda_synchronize", None)
    if original is None:
        return False

    def _cuda_synchronize(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        then()
        return out

    torch._C._cuda_synchronize = _cuda_synchronize
    return True


class PostImport(importlib.abc.MetaPathFinder):
    """Calls `then(module)` once `name` has been imported completely (first import only)."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then
        self.busy = False  # inside its own search: another PostImport of the same name asks each finder too

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self.busy:
            return None
        self.busy = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = _ThenLoader(spec.loader, self)
                    return spec
            return None
        finally:
            self.busy = False

    def done(self, module: ModuleType) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self.then(module)


class _ThenLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, hook: PostImport) -> None:
        self.loader, self.hook = loader, hook

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader  # the module sees its real loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader  # type: ignore[union-attr]  # checked just above
        self.loader.exec_module(module)
        self.hook.done(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)
