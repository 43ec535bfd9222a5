"""One capture session per traced Python process, started by the bootstrap
(tracer/capture/boot/sitecustomize.py) when TRACER_CAPTURE_DIR is set.

Each process writes `<dir>/<host>-<pid>[-r<RANK>].json` at start (a marker: the process ran) and
rewrites it at exit. CUPTI starts at the process's first CUDA use (torch's CUDA initialisation, or
the import of another CUDA library; CaptureOptions.lazy), so a process that never uses CUDA
(torchrun's agent) pays for no CUPTI and writes no trace. Once started, records go every
`flush_s` seconds into `<stem>.partial.sqlite` (committed batches), renamed `<stem>.sqlite` when
the process finishes it at exit: a process that dies leaves what it flushed, which `trace run`
completes and marks partial.

A process never writes another's files: a fork child starts a fresh session under its own pid and
drops what it inherited. Exit paths: atexit; os._exit (wrapped: multiprocessing's fork children
leave so, after its finalizers); SIGTERM when the program has no handler of its own (torchrun stops
its workers so), also when it arrives while the trace is being written (it waits for the write).
Deaths: a fatal signal flushes and commits what CUPTI holds before the process dies of it
(fatal.py); a SIGKILL or the OOM killer loses at most what ran after the last flush, which the
marker dates (`last_flush_unix_ns`): every flush_s, and after device synchronisations (the first
always, later ones at most every sync_flush_s). `trace run --stop-after` asks the processes (a
STOP_FILE in the capture folder, seen by the flush thread) to finish their traces and run on
untraced."""
from __future__ import annotations

import atexit
import importlib.abc
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple, NoReturn

from tracer.capture.options import ENV_DIR, ENV_OPTIONS, STOP_FILE, CaptureOptions
from tracer.capture.timing import Timing
from tracer.format.marker import Marker, State
from tracer.format.procs import file_stem

RANK_ENV = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
LOCAL_RANK_ENV = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK")
WORLD_SIZE_ENV = ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")

_session: Session | None = None


def _env_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.strip().lstrip("-").isascii() and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


class Identity(NamedTuple):
    """Who the process is: the marker's first fields."""

    pid: int
    ppid: int
    host: str
    rank: int | None
    local_rank: int | None
    world_size: int | None
    fork_parent: int | None = None

    @property
    def stem(self) -> str:
        return file_stem(self.host, self.pid, self.rank)


def identity(fork_parent: int | None = None) -> Identity:
    return Identity(pid=os.getpid(), ppid=os.getppid(), host=socket.gethostname(), rank=_env_int(RANK_ENV),
                    local_rank=_env_int(LOCAL_RANK_ENV), world_size=_env_int(WORLD_SIZE_ENV), fork_parent=fork_parent)


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)


def write_marker(folder: Path, marker: Marker) -> None:
    write_json(folder / f"{marker.file}.json", marker.to_json())


class Session:
    def __init__(self, folder: Path, options: CaptureOptions) -> None:
        from tracer.capture.backends import make_backend

        self.timing = Timing()
        self.folder, self.options = folder, options
        self.info = identity()
        self.backend = make_backend(options, self.info.pid, self.timing)
        self.memory = None
        if options.memory:
            from tracer.capture.memory_recorder import MemoryRecorder
            from tracer.capture.window import spec_of

            b = self.backend
            self.memory = MemoryRecorder(b.clock, b.push, b.pop, devices=options.devices,
                                         window=spec_of(options.memory_steps, options.memory_range))
        self.writer: Any = None
        self.finished = False
        self.forked = False
        self.exception: str | None = None
        self.lock = threading.RLock()  # finish and activation
        self.write_lock = threading.Lock()  # the trace file: flushes and the final write
        self.finishing: int | None = None  # thread ident writing the trace at exit
        self.pending_signal: int | None = None  # a SIGTERM that arrived while the trace was being written
        self.flusher: threading.Thread | None = None
        self.stop_flushing = threading.Event()
        self.last_forced = -float("inf")  # monotonic time of the last forced flush (none yet)
        self.last_flush_ns: int | None = None  # wall time of the last committed flush
        self.fatal_signal: int | None = None
        self.flushed_kernels = {"periodic": 0, "sync": 0}  # kernels each kind of flush wrote before the exit
        self.devices: list[dict[str, Any]] = []  # the GPUs it holds a context on (environment.json)

    @property
    def stem(self) -> str:
        return self.info.stem

    def clock_pair(self) -> tuple[int, int]:
        return (int(self.backend.clock()), time.time_ns())

    def marker(self) -> Marker:
        return Marker(**self.info._asdict(), file=self.stem, argv=tuple(getattr(sys, "orig_argv", sys.argv)),
                      executable=sys.executable, backend=self.backend.name, memory=self.options.memory, state=State.RUNNING,
                      clock_start=self.clock_pair(), fork_child=self.forked)

    # --- start ----------------------------------------------------------------------------
    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.started = self.marker()
        write_marker(self.folder, self.started)
        if not self.options.lazy:
            self.activate()
        else:
            sys.meta_path.insert(0, ImportTrigger(self.options.triggers, lambda name: self.activate(f"import {name}")))
        from tracer.capture.torch_mode import PostImport

        if self.memory is not None and not self.memory.window.spec.whole_run:
            self._when_imported("nvtx.nvtx", self.on_nvtx_package)
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "_C"):
            self.on_torch(torch)
        else:
            sys.meta_path.insert(0, PostImport("torch", self.on_torch))

    @staticmethod
    def _when_imported(name: str, then: Any) -> None:
        from tracer.capture.torch_mode import PostImport

        module = sys.modules.get(name)
        if module is not None:
            then(module)
        else:
            sys.meta_path.insert(0, PostImport(name, then))

    def on_nvtx_package(self, module: ModuleType) -> None:
        """The `nvtx` package's ranges (its functions and its Domain methods) open and close the
        memory capture window."""
        from tracer.capture.window import hook_nvtx_domain, hook_nvtx_package

        assert self.memory is not None
        try:
            hook_nvtx_package(self.memory.window, module)
        except Exception as exc:  # these ranges then reach the window through CUPTI's NVTX callbacks only
            self.count_error("nvtx_hooks", exc)
        try:
            hook_nvtx_domain(self.memory.window, module.Domain)
        except Exception as exc:
            self.count_error("nvtx_domain_hooks", exc)

    def on_torch(self, torch: ModuleType) -> None:
        """torch arrived: CUPTI starts at its CUDA initialisation, flushes after its device
        synchronisations; --memory's torch parts start now."""
        from tracer.capture import torch_mode

        try:
            if self.options.lazy and not self.backend.active:
                torch_mode.activate_at_cuda_init(torch, lambda: self.activate("torch CUDA init"))
            torch_mode.after_device_sync(torch, self.flush_at_sync)
            if self.memory is not None:
                with self.timing.phase("torch_hooks"):
                    self.memory.mode = torch_mode.start_recording(
                        self.memory, torch, dispatch=self.options.has("dispatch"), allocator=self.options.has("allocator"),
                        timing=self.timing)
        except Exception as exc:  # the program runs, less traced: counted into the trace's metadata
            self.count_error("torch_hooks", exc)
        if self.memory is not None and not self.memory.window.spec.whole_run:
            from tracer.capture.window import hook_torch_nvtx

            try:
                hook_torch_nvtx(self.memory.window, importlib.import_module("torch.cuda.nvtx"))
            except Exception as exc:  # the window then opens on the nvtx package's ranges only
                self.count_error("torch_nvtx_hooks", exc)

    def count_error(self, where: str, exc: BaseException) -> None:
        from tracer.capture.records import count_error

        count_error(self.memory.errors if self.memory is not None else self.backend.records.errors, where, exc)

    def activate(self, why: str = "start") -> None:
        """Start CUPTI, the trace file and the periodic flush (once; never raising)."""
        with self.lock:
            if self.backend.active or self.finished:
                return
            try:
                self.backend.activate(self.memory)
                from tracer.capture.nsys_schema import TraceWriter

                self.writer = TraceWriter(self.folder / f"{self.stem}.sqlite", self.info.pid, self.backend.name)
            except Exception as exc:
                print(f"tracer: CUPTI not started in pid {os.getpid()}: {type(exc).__name__}: {exc}", file=sys.stderr)
                self.started = self.started.with_(cupti_error=f"{type(exc).__name__}: {exc}"[:300])
                return
            from tracer.capture import fatal

            self.started = self.started.with_(cupti_started_by=why, fatal_signals=tuple(fatal.install(self.flush_at_death)))
            self.timing.mark("cupti_started")
            self.update_marker()
            self._start_flusher()

    def _start_flusher(self) -> None:
        if self.options.flush_s <= 0 or self.writer is None:
            return
        self.stop_flushing = threading.Event()
        self.flusher = threading.Thread(target=self._flush_loop, daemon=True, name="tracer-flush")
        self.flusher.start()

    def _flush_loop(self) -> None:
        stop = self.folder / STOP_FILE
        while not self.stop_flushing.wait(self.options.flush_s):
            if stop.exists():  # trace run --stop-after: finish the trace, the program runs on
                self.finish("stop-after")
                return
            self.flush()

    def flush(self, forced: bool = False) -> None:
        """Completed records into the trace file, one committed batch (never raising). `forced`
        (flush_at_sync) never waits for another flush under way."""
        if self.forked and not _fork_child_may_flush():
            return
        if not self.write_lock.acquire(blocking=not forced):
            return
        try:
            if self.finished or self.writer is None:
                return
            kind, before = "sync" if forced else "periodic", self.writer.kernels
            with self.timing.phase(f"{kind}_flush"):
                self.backend.flush(forced)
                self.writer.append(self.backend.take())
            self.flushed_kernels[kind] += self.writer.kernels - before
            self.last_flush_ns = time.time_ns()
            self.update_marker()
        except Exception as exc:
            self.count_error("sync_flush" if forced else "periodic_flush", exc)
        finally:
            self.write_lock.release()

    def flush_at_sync(self) -> None:
        """After the program synchronised the device (torch.cuda.synchronize): nothing is in
        flight, so a forced flush cuts no record, and hands over the buffers the periodic flush
        holds back (collector.BUFFER_BYTES). The first synchronisation always flushes (a short
        program's only one may come just before it dies); later ones at most every sync_flush_s."""
        if not self.backend.active or self.finished or self.options.flush_s <= 0:
            return
        if time.monotonic() - self.last_forced >= self.options.sync_flush_s:
            self.last_forced = time.monotonic()
            self.flush(forced=True)

    def flush_at_death(self, signum: int) -> None:
        """In the fatal-signal handler (fatal.py), before the process dies of `signum`: the
        marker says so first (cheap, and kept should the flush hang), then one forced flush and
        its committed batch; `trace run` completes the partial file."""
        if self.finished or self.info.pid != os.getpid():
            return
        self.fatal_signal = signum
        self.stop_flushing.set()
        self.started = self.started.with_(fatal_signal=signum)
        self.update_marker()
        if not self.backend.active or self.writer is None or not self.write_lock.acquire(timeout=2.0):
            return
        try:
            self.backend.flush(True)
            self.writer.append(self.backend.take())
            self.last_flush_ns = time.time_ns()
            self.started = self.started.with_(flushed_at_signal=True)
            self.update_marker()
        except Exception as exc:
            self.count_error("fatal_flush", exc)
        finally:
            self.write_lock.release()

    def update_marker(self) -> None:
        """The running process's marker with what it has flushed so far (kernels, timing): what a
        process that dies leaves, and what `trace run` keeps when it settles it."""
        kernels = self.writer.kernels if self.writer is not None else 0
        if not self.devices and kernels:
            self.devices = devices()
        write_marker(self.folder, self.started.with_(kernels=kernels, flushed_kernels=dict(self.flushed_kernels),
                                                     last_flush_unix_ns=self.last_flush_ns, devices=tuple(self.devices),
                                                     timing=self.timing.to_json()))

    # --- fork -----------------------------------------------------------------------------
    def after_fork(self) -> None:
        """In the child: a fresh session under the child's pid; nothing of the parent's is kept."""
        self.lock = threading.RLock()
        self.write_lock = threading.Lock()
        self.info = identity(fork_parent=self.info.pid)
        self.forked = True
        self.finished = False
        self.flushed_kernels = {"periodic": 0, "sync": 0}
        self.devices = []
        self.finishing = self.pending_signal = None
        self.last_flush_ns = self.fatal_signal = None
        self.last_forced = -float("inf")
        self.backend.after_fork(self.info.pid, int(self.backend.clock()))
        if self.memory is not None:
            self.memory.reset_after_fork()
        self.started = self.marker()
        write_marker(self.folder, self.started)
        if self.writer is not None:  # the parent's file is the parent's: the child starts its own
            self.writer = None
            from tracer.capture.nsys_schema import TraceWriter

            self.writer = TraceWriter(self.folder / f"{self.stem}.sqlite", self.info.pid, self.backend.name)
            self._start_flusher()

    # --- finish ---------------------------------------------------------------------------
    def finish(self, ended: str, exit_code: int | None = None) -> None:
        """Write the trace, then the final marker; at most once per process, never raising. A
        second caller (the SIGTERM watcher) waits until the first has written."""
        with self.lock:
            if self.finished or self.info.pid != os.getpid():
                return
            self.finished = True
            self.finishing = threading.get_ident()
            try:
                self._write(ended, exit_code)
            except Exception as exc:  # the program's exit is not ours to spoil: one line on stderr
                print(f"tracer: capture of pid {os.getpid()} not written: {type(exc).__name__}: {exc}", file=sys.stderr)
            finally:
                self.finishing = None
        if self.pending_signal is not None:
            _die(self.pending_signal)

    def _write(self, ended: str, exit_code: int | None) -> None:
        """The trace, then the marker: written even when the trace could not be (its error in
        `trace_error`; the batches already flushed stay in the partial file for `trace run`)."""
        self.stop_flushing.set()
        from tracer.capture import fatal

        with self.write_lock:
            with self.timing.phase("exit_total"):
                try:
                    fields = self._write_trace(ended, exit_code) if self.backend.active else self._no_trace()
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"[:300]
                    print(f"tracer: trace of pid {os.getpid()} not completed at exit: {error}", file=sys.stderr)
                    fields = dict(kernels=self.writer.kernels if self.writer is not None else 0, trace=None, cuda=True,
                                  trace_error=error)
        fatal.uninstall()  # a crash in the interpreter's teardown must not call into Python
        state = State.DETACHED if ended == "stop-after" else State.EXITED  # detached: it runs on, untraced
        write_marker(self.folder, self.started.with_(
            state=state, ended=ended, exit=exit_code, exception=self.exception, clock_end=self.clock_pair(), dist_rank=_dist_rank(),
            timing=self.timing.to_json(), flushed_kernels=dict(self.flushed_kernels), **fields))

    def _write_trace(self, ended: str, exit_code: int | None) -> dict[str, Any]:
        rec, memory2 = self.backend.stop(forked=self.forked, quick=ended in ("sigterm", "stop-after"))
        if self.memory is not None:
            with self.timing.phase("exit_memory_tables"):
                self.memory.finish(rec, memory2)
        rec.pid = self.info.pid
        rec.meta["TRACER_PROCESS"] = self.stem
        with self.timing.phase("exit_write"):
            trace = self.writer.close(rec, target_exit=exit_code)
        return dict(kernels=self.writer.kernels, trace=trace.name, cuda=True, devices=tuple(self.devices or devices()),
                    errors={k: f"{n}: {first}" for k, (n, first) in rec.errors.items()})

    def _no_trace(self) -> dict[str, Any]:
        """CUPTI never started: no trace file. Say so, and whether CUDA was used all the same (a
        context created by a path the lazy start does not see: its kernels were not recorded)."""
        missed = cuda_context_exists() if self.backend.name == "cupti" else False
        return dict(kernels=0, trace=None, cuda=bool(missed),
                    untraced_cuda="a CUDA context exists but CUPTI never started: its kernels were not recorded" if missed else None)


def _fork_child_may_flush() -> bool:
    from tracer.capture.backends import cuda_initialized

    return cuda_initialized()


def _libcuda() -> Any:
    """libcuda when this process has already loaded it (never loading it), else None."""
    import ctypes

    try:
        if "libcuda.so" not in Path("/proc/self/maps").read_text():
            return None
        return ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return None


def _active_devices(lib: Any) -> list[int]:
    """Ordinals of the devices whose primary context is active in this process."""
    import ctypes

    count, out = ctypes.c_int(0), []
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:  # not initialised: no context
        return []
    for ordinal in range(count.value):
        dev, flags, active = ctypes.c_int(0), ctypes.c_uint(0), ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), ordinal) == 0 and \
                lib.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active)) == 0 and active.value:
            out.append(ordinal)
    return out


def cuda_context_exists() -> bool:
    """Whether this process holds an active CUDA primary context, asked of libcuda only when it is
    already loaded."""
    lib = _libcuda()
    return lib is not None and bool(_active_devices(lib))


def devices() -> list[dict[str, Any]]:
    """The GPUs this process holds a context on, as environment.json names them (trace run reads
    them from the markers instead of starting CUDA itself); [] when it holds none or libcuda does
    not answer (never raising: the trace matters more)."""
    try:
        lib = _libcuda()
        return _describe(lib, _active_devices(lib)) if lib is not None else []
    except Exception:
        return []


def _describe(lib: Any, ordinals: list[int]) -> list[dict[str, Any]]:
    import ctypes

    out = []
    for ordinal in ordinals:
        dev, name, driver = ctypes.c_int(0), ctypes.create_string_buffer(256), ctypes.c_int(0)
        attrs = {key: ctypes.c_int(0) for key in (75, 76, 16)}  # compute capability major, minor; SMs
        memory = ctypes.c_size_t(0)
        if lib.cuDeviceGet(ctypes.byref(dev), ordinal) != 0 or lib.cuDeviceGetName(name, 256, dev) != 0:
            continue
        for key, cell in attrs.items():
            lib.cuDeviceGetAttribute(ctypes.byref(cell), key, dev)
        lib.cuDeviceTotalMem_v2(ctypes.byref(memory), dev)
        lib.cuDriverGetVersion(ctypes.byref(driver))
        out.append({"ordinal": ordinal, "name": name.value.decode(errors="replace"), "sm": f"{attrs[75].value}{attrs[76].value}",
                    "sms": attrs[16].value, "memory_gb": round(memory.value / 2**30, 1),
                    "cuda": f"{driver.value // 1000}.{driver.value % 1000 // 10}"})
    return out


class ImportTrigger(importlib.abc.MetaPathFinder):
    """Calls `then(name)` when one of `names` starts being imported (before its code runs, so
    CUPTI is there before the library touches CUDA), once; then steps aside."""

    def __init__(self, names: tuple[str, ...], then: Any) -> None:
        self.names, self.then = frozenset(names), then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname in self.names:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            self.then(fullname)
        return None


def _dist_rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    try:
        return int(dist.get_rank()) if dist is not None and dist.is_initialized() else None
    except Exception:
        return None


def current() -> Session | None:
    return _session


def memory_recorder() -> Any:
    """The recorder of this process's session when it records memory (tracer's launcher asks)."""
    s = _session
    return s.memory if s is not None and s.info.pid == os.getpid() else None


# --- exit paths ---------------------------------------------------------------------------------
def _at_exit() -> None:
    if _session is not None:
        _session.finish("atexit", 1 if _session.exception else None)


def _die(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _on_sigterm(signum: int, frame: Any) -> None:
    s = _session
    if s is not None and s.finishing == threading.get_ident():
        s.pending_signal = signum  # it interrupted the trace's own write: die once that is done
        return
    if s is not None:
        s.finish("sigterm", 128 + signum)
    _die(signum)


def _watch_sigterm(fd: int) -> None:
    """Python runs signal handlers on the main thread only, between bytecodes: a main thread
    blocked in C (a collective waiting for a dead rank, a device sync) never gets there. Python's
    C-level handler also writes the signal number to the wakeup fd, read here on another thread."""
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGTERM in data and _session is not None and signal.getsignal(signal.SIGTERM) is _on_sigterm:
            _session.finish("sigterm", 128 + signal.SIGTERM)
            os._exit(128 + signal.SIGTERM)


def _install_sigterm() -> None:
    """Only when the program has no SIGTERM handler (and no wakeup fd) of its own."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return
    signal.signal(signal.SIGTERM, _on_sigterm)
    r, w = os.pipe()
    os.set_blocking(w, False)
    if signal.set_wakeup_fd(w, warn_on_full_buffer=False) != -1:  # someone else's (asyncio): give it back
        signal.set_wakeup_fd(-1)
        os.close(r)
        os.close(w)
        return
    threading.Thread(target=_watch_sigterm, args=(r,), daemon=True, name="tracer-sigterm").start()


def _hook_os_exit() -> None:
    """os._exit skips atexit: the trace is written first (once; a no-op after finish)."""
    original = os._exit
    if getattr(original, "__tracer_hook__", False):
        return

    def _exit(status: int) -> NoReturn:
        s = _session
        if s is not None:
            s.finish("os._exit", status)
        original(status)

    _exit.__tracer_hook__ = True  # type: ignore[attr-defined]  # a mark on the function: hooked once
    os._exit = _exit


def _excepthook(previous: Any) -> Any:
    def hook(kind: Any, value: Any, tb: Any) -> None:
        if _session is not None and not issubclass(kind, SystemExit):
            _session.exception = f"{kind.__name__}: {value}"[:300]
        previous(kind, value, tb)

    return hook


def _after_fork_child() -> None:
    if _session is None:
        return
    try:
        _session.after_fork()
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:  # the watcher thread did not survive the fork
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            _install_sigterm()
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:  # its fork children leave through os._exit, after its finalizers
            mp_util.register_after_fork(_session, _finalize_in_mp_child)
    except Exception as exc:
        print(f"tracer: capture of fork child {os.getpid()} not started: {exc}", file=sys.stderr)


def _finalize_in_mp_child(session: Session) -> None:
    """Run by multiprocessing in its fork child after it cleared the finalizers it inherited."""
    import multiprocessing.util

    multiprocessing.util.Finalize(None, session.finish, args=("finalizer",), exitpriority=-100)


def start_session(folder: Path, options: CaptureOptions, begun: float | None = None) -> Session:
    global _session
    session = Session(folder, options)
    _session = session
    if begun is not None:
        session.timing.phases["bootstrap_imports"] = time.perf_counter() - begun
    with session.timing.phase("bootstrap"):
        session.start()
    atexit.register(_at_exit)
    _hook_os_exit()
    os.register_at_fork(after_in_child=_after_fork_child)
    sys.excepthook = _excepthook(sys.excepthook)
    _install_sigterm()
    return session


def start_from_env(begun: float | None = None) -> Session | None:
    """The bootstrap's entry point: a session when TRACER_CAPTURE_DIR is set, else nothing.
    `begun`: perf_counter when the bootstrap began (its imports are counted in the timing)."""
    global _session
    folder = os.environ.get(ENV_DIR)
    if not folder or _session is not None or (Path(folder) / STOP_FILE).exists():  # after --stop-after: untraced
        return None
    try:
        session = start_session(Path(folder), CaptureOptions.from_env(os.environ.get(ENV_OPTIONS)), begun)
        return session
    except Exception as exc:  # the process still says it ran, and why it is not traced
        _session = None
        info = identity()
        write_marker(Path(folder), Marker(**info._asdict(), file=info.stem, argv=tuple(getattr(sys, "orig_argv", sys.argv)),
                                          state=State.CAPTURE_FAILED, error=f"{type(exc).__name__}: {exc}"[:500]))
        raise
