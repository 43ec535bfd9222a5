"""Is a CUDA GPU visible, asked of the driver through cuda.bindings (no torch import), and what a
user without one can still run. Captures (trace run, sanitize run) check here first, so a box
with no GPU hears "no GPU" before anything about missing capture tools."""
from __future__ import annotations

from dataclasses import dataclass

from tracer.errors import NoGpuError

NO_GPU_ADVICE = "trace/sanitize/run need a GPU; `tracer run torch_composite --device cpu` and `tracer demo` work without"


@dataclass(frozen=True)
class GpuProbe:
    devices: int | None  # None: the driver could not be asked (cuda-python missing)
    detail: str  # driver version when devices > 0, else why there is none


def probe() -> GpuProbe:
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        return GpuProbe(None, f"cuda-python is not installed ({exc})")
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # cuda.pathfinder raises when libcuda.so (the driver) is absent
        return GpuProbe(0, f"the NVIDIA driver library (libcuda) could not be loaded: {type(exc).__name__}")
    if err == driver.CUresult.CUDA_ERROR_NO_DEVICE:
        return GpuProbe(0, "the NVIDIA driver sees no device")
    if err != driver.CUresult.CUDA_SUCCESS:
        return GpuProbe(0, f"cuInit failed: {err.name}")
    _, count = driver.cuDeviceGetCount()
    _, version = driver.cuDriverGetVersion()
    return GpuProbe(count, f"driver CUDA {version // 1000}.{version % 1000 // 10}")


def require_gpu_for_capture() -> None:
    """NoGpuError (exit 4) where the driver reports no GPU; where it cannot be asked, the capture
    itself reports what is wrong."""
    found = probe()
    if found.devices == 0:
        raise NoGpuError(f"no CUDA GPU is visible ({found.detail}); {NO_GPU_ADVICE}")
