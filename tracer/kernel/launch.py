"""Launch the NVRTC-compiled cast-transpose on PyTorch's current stream through cuda.core."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, cache
from typing import TYPE_CHECKING, Any

from tracer.kernel import compile as nvrtc_compile
from tracer.kernel.cudacore import cuda_core
from tracer.errors import NoGpuError, UsageError
from tracer.gpu import NO_GPU_ADVICE
from tracer.kernel.spec import THREADS, Config, InDtype, KernelKey, OutFormat, Variant, pick_config

if TYPE_CHECKING:
    import torch

ALIGN = 16
MAX_GRID = 2**31 - 1
# Each block walks up to this many tiles, in whole waves of resident blocks (docs/benchmarks.md):
# a fence variant's per-block fence is then paid once per several tiles, and no wave runs nearly empty.
TILES_PER_BLOCK = 4


def require_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        raise NoGpuError(f"no CUDA GPU is visible (torch.cuda.is_available() is False); {NO_GPU_ADVICE}")


def torch_in_dtype(t: torch.Tensor) -> InDtype:
    import torch

    table = {torch.bfloat16: InDtype.BF16, torch.float16: InDtype.FP16, torch.float32: InDtype.FP32}
    if t.dtype not in table:
        raise UsageError(f"input dtype {t.dtype} is not supported (allowed: bfloat16, float16, float32)")
    return table[t.dtype]


def torch_fp8_dtype(fmt: OutFormat) -> torch.dtype:
    import torch

    return torch.float8_e4m3fn if fmt is OutFormat.E4M3 else torch.float8_e5m2


def device_arch(index: int | None = None) -> str:
    import torch

    major, minor = torch.cuda.get_device_capability(index)
    return f"sm_{major}{minor}"


def num_sms(index: int | None = None) -> int:
    import torch

    return torch.cuda.get_device_properties(index).multi_processor_count


@cache
def _kernel(key: KernelKey, device_index: int) -> Any:
    return cuda_core().ObjectCode.from_cubin(nvrtc_compile.cubin(key)).get_kernel(nvrtc_compile.KERNEL_NAME)


class _StreamRef:
    """Hands a foreign stream handle to cuda.core through the __cuda_stream__ protocol."""

    def __init__(self, handle: int) -> None:
        self._handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._handle)


@lru_cache(maxsize=64)
def _core_stream(device_index: int, handle: int) -> Any:
    dev = cuda_core().Device(device_index)
    dev.set_current()
    return dev.create_stream(_StreamRef(handle))


@dataclass(frozen=True)
class CastOutputs:
    rowwise: torch.Tensor  # [M, N] fp8
    columnwise: torch.Tensor  # [N, M] fp8
    config: Config


def resolve_config(x: torch.Tensor, config: Config | None) -> Config:
    dtype = torch_in_dtype(x)
    rows, cols = x.shape
    if config is None:
        return pick_config(dtype, rows, cols, num_sms(x.device.index))
    config.check_shape(dtype, rows, cols)
    return config


def cast_transpose(
    x: torch.Tensor,
    scale: torch.Tensor,
    scale_inv: torch.Tensor,
    amax: torch.Tensor,
    *,
    out_format: OutFormat = OutFormat.E4M3,
    variant: Variant = Variant.NONE,
    config: Config | None = None,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
    grid: int | None = None,
) -> CastOutputs:
    """Cast x [M, N] to FP8 rowwise and transposed; amax (float32, 1 element) is max-reduced in place.
    grid: blocks to launch (default: default_grid); each block loops over tiles blockIdx.x, blockIdx.x + grid, ..."""
    import torch

    if not x.is_cuda:
        raise NoGpuError("cast_transpose needs a CUDA tensor; no GPU input was given")
    if x.dim() != 2 or not x.is_contiguous():
        raise UsageError(f"input must be a contiguous 2-D tensor, got shape {tuple(x.shape)}")
    cfg = resolve_config(x, config)
    rows, cols = x.shape
    fp8 = torch_fp8_dtype(out_format)
    row, col = out if out is not None else (
        torch.empty((rows, cols), dtype=fp8, device=x.device),
        torch.empty((cols, rows), dtype=fp8, device=x.device),
    )
    for t in (x, row, col):
        if t.data_ptr() % ALIGN:
            raise UsageError(f"tensor at {t.data_ptr():#x} is not {ALIGN}-byte aligned; pass a fresh contiguous tensor")
    key = KernelKey(variant=variant, config=cfg, in_dtype=torch_in_dtype(x), out_format=out_format, arch=device_arch(x.device.index))
    launch_raw(key, x.data_ptr(), row.data_ptr(), col.data_ptr(), scale.data_ptr(), scale_inv.data_ptr(),
               amax.data_ptr(), rows, cols, x.device.index, torch.cuda.current_stream(x.device).cuda_stream, grid)
    return CastOutputs(row, col, cfg)


def blocks_per_gpu(kernel: Any, device_index: int) -> int:
    """Blocks of kernel that fit on the whole GPU at once."""
    per_sm = kernel.occupancy.max_active_blocks_per_multiprocessor(THREADS, 0)
    return max(1, per_sm) * num_sms(device_index)


@cache
def resident_blocks(key: KernelKey, device_index: int) -> int:
    return blocks_per_gpu(_kernel(key, device_index), device_index)


def default_grid(resident: int, tiles: int) -> int:
    """The fewest whole waves of resident blocks that leave no block more than TILES_PER_BLOCK tiles."""
    waves = max(1, -(-tiles // (TILES_PER_BLOCK * resident)))
    return min(tiles, waves * resident, MAX_GRID)


def launch_raw(key: KernelKey, x: int, row: int, col: int, scale: int, scale_inv: int, amax: int,
               rows: int, cols: int, device_index: int, stream_handle: int, grid: int | None = None) -> None:
    if grid is not None and grid < 1:
        raise UsageError(f"grid={grid} must be >= 1 block")
    tiles = key.config.blocks(key.in_dtype, rows, cols)
    blocks = default_grid(resident_blocks(key, device_index), tiles) if grid is None else min(tiles, grid, MAX_GRID)
    launch_kernel(_kernel(key, device_index), blocks, (x, row, col, scale, scale_inv, amax), rows, cols,
                  device_index, stream_handle, in_bytes=key.in_dtype.nbytes,
                  scale_index=1 if key.variant is Variant.PLANTED_UNINIT else 0)


def launch_kernel(kernel: Any, blocks: int, pointers: tuple[int, int, int, int, int, int], rows: int, cols: int,
                  device_index: int, stream_handle: int, *, in_bytes: int = 2, scale_index: int = 0) -> None:
    """Launch a compiled cast_transpose; pointers: x, rowwise, columnwise, scale, scale_inv, amax."""
    import numpy as np

    from tracer.capture.session import memory_recorder

    core = cuda_core()

    def go() -> None:
        core.launch(_core_stream(device_index, stream_handle), core.LaunchConfig(grid=blocks, block=THREADS), kernel,
                    *pointers, np.int32(rows), np.int32(cols))

    recorder = memory_recorder()
    if recorder is None:
        go()
        return
    with recorder.tracer_launch("cast_transpose", cast_transpose_accesses(pointers, rows, cols, in_bytes, scale_index)):
        go()


def cast_transpose_accesses(pointers: tuple[int, int, int, int, int, int], rows: int, cols: int, in_bytes: int,
                            scale_index: int) -> list[tuple[int, int, int, str]]:
    """What the kernel touches (address, bytes, mode, label) for `trace run --memory`: mode 1 read,
    2 write, 3 both (amax is max-reduced in place)."""
    x, row, col, scale, scale_inv, amax = pointers
    return [(x, rows * cols * in_bytes, 1, "x"), (row, rows * cols, 2, "rowwise"), (col, rows * cols, 2, "columnwise"),
            (scale + 4 * scale_index, 4, 1, "scale"), (scale_inv, 4, 2, "scale_inv"), (amax, 4, 3, "amax")]
