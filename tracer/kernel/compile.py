"""NVRTC compilation of the kernel family: PTX and cubin, cached per KernelKey.

Works without a GPU or driver: cubin through cuda.core's Program, PTX through the nvrtc
bindings (cuda.core asks the driver before it emits PTX). cuda.core is imported only when a
cubin is compiled: every CLI command imports this module, and cuda.core is slow to import.
"""
from __future__ import annotations

import hashlib
import os
import threading
from functools import cache
from pathlib import Path

from tracer.errors import CompileError, ToolMissingError, UsageError
from tracer.kernel.spec import KernelKey
from tracer.resources import KERNEL_DIR

KERNEL_FILE = "cast_transpose.cu"
KERNEL_NAME = "cast_transpose"


def kernel_source() -> str:
    path = KERNEL_DIR / KERNEL_FILE
    if not path.is_file():
        raise ToolMissingError(f"kernel source {path} not found: reinstall tracer (its wheel ships the kernel sources)")
    return path.read_text()


def _options(key: KernelKey) -> list[str]:
    opts = [f"-arch={key.arch}", "-std=c++17", "-lineinfo"]
    opts += [f"-D{name}={value}" for name, value in key.macros()]
    return opts


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def _nvrtc_compile(key: KernelKey, want: str) -> bytes:
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise ToolMissingError(f"cuda-python is not installed ({exc}): pip install cuda-python nvidia-cuda-nvrtc") from exc
    src = kernel_source().encode()
    err, prog = nvrtc.nvrtcCreateProgram(src, str(KERNEL_DIR / KERNEL_FILE).encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in _options(key)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CompileError(f"NVRTC failed for {describe(key)}: {log.decode(errors='replace').strip()}")
        getsize, get = (
            (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if want == "ptx" else (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        )
        err, size = getsize(prog)
        _check(nvrtc, err, "size query")
        buf = b" " * size
        (err,) = get(prog, buf)
        _check(nvrtc, err, "output query")
        return buf
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _check(nvrtc: object, err: object, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:  # type: ignore[attr-defined]  # cuda.bindings has no stubs for nvrtcResult
        raise CompileError(f"NVRTC {what} failed: {err}")


def describe(key: KernelKey) -> str:
    return f"{key.variant.value} config={key.config} {key.in_dtype.value}->{key.out_format.value} {key.arch}"


@cache
def ptx(key: KernelKey) -> str:
    return _nvrtc_compile(key, "ptx").rstrip(b"\x00").decode()


def _cache_dir() -> Path:
    root = os.environ.get("TRACER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tracer")
    return Path(root) / "cubin"


def _cache_path(key: KernelKey) -> Path:
    h = hashlib.sha256()
    h.update(kernel_source().encode())
    h.update(" ".join(_options(key)).encode())
    h.update(nvrtc_version().encode())
    return _cache_dir() / f"{key.variant.value}-{h.hexdigest()[:24]}.cubin"


def apply_edits(source: str, edits: list[dict[str, str]], what: str) -> str:
    """source with each {old, new} replacement made; every old text must occur exactly once."""
    for n, edit in enumerate(edits, 1):
        if not isinstance(edit, dict) or set(edit) != {"old", "new"}:
            raise UsageError(f"{what}: edit {n} must have exactly the keys old and new")
        found = source.count(edit["old"])
        if found != 1:
            raise UsageError(f"{what}: edit {n}'s old text occurs {found} times in the kernel source (must be once)")
        source = source.replace(edit["old"], edit["new"])
    return source


def source_cubin(source: str, key: KernelKey, filename: str) -> bytes:
    """Cubin of any kernel source with key's macros (uncached: for A/B comparisons of edits)."""
    from tracer.kernel.cudacore import cuda_core

    core = cuda_core()
    opts = core.ProgramOptions(name=filename, arch=key.arch, std="c++17", lineinfo=True, define_macro=list(key.macros()))
    try:
        return bytes(core.Program(source, "c++", options=opts).compile("cubin").code)
    except Exception as exc:  # cuda.core raises its own NVRTCError carrying the log
        if type(exc).__name__ in ("NVRTCError", "CUDAError"):
            raise CompileError(f"NVRTC failed for {describe(key)}: {exc}") from exc
        raise


@cache
def cubin(key: KernelKey) -> bytes:
    """Compiled once per key: in memory for the process, on disk across processes."""
    path = _cache_path(key)
    if path.is_file():
        return path.read_bytes()
    data = source_cubin(kernel_source(), key, str(KERNEL_DIR / KERNEL_FILE))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")  # threads may compile one key at once
    tmp.write_bytes(data)
    tmp.replace(path)
    return data
