"""On a GPU: bit-exact rowwise and columnwise outputs, amax and scale_inv for every fence variant,
input dtype and output format, on aligned and unaligned shapes, with random inputs and poisoned outputs."""
from __future__ import annotations

import zlib

import pytest

torch = pytest.importorskip("torch")

from tracer.fp8.ref import amax_of, torch_cast
from tracer.kernel.spec import FENCE_VARIANTS, Config, InDtype, OutFormat, Variant, all_configs

pytestmark = pytest.mark.gpu

SHAPES = [(2048, 12288), (768, 1024), (256, 65536), (65536, 128), (256, 256), (120, 2080), (1481, 677), (1, 3221), (2333, 1)]
TORCH_DTYPES = {InDtype.BF16: "bfloat16", InDtype.FP16: "float16", InDtype.FP32: "float32"}
POISON = 0xA5


def _random_input(rows: int, cols: int, dtype: InDtype, seed: int) -> torch.Tensor:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, cols, device="cuda", generator=gen) * 40
    x = torch.where(x == 0, torch.full_like(x, 0.5), x)  # never zeros
    return x.to(getattr(torch, TORCH_DTYPES[dtype]))


def run_and_check(x: torch.Tensor, fmt: OutFormat, variant: Variant, config: Config | None, grid: int | None = None) -> Config:
    from tracer.kernel.launch import cast_transpose, torch_fp8_dtype

    rows, cols = x.shape
    scale = torch.tensor([1.7 if fmt is OutFormat.E4M3 else 3.1, 0.0], device="cuda")
    scale_inv = torch.full((1,), -1.0, device="cuda")
    amax = torch.zeros(1, device="cuda")
    fp8 = torch_fp8_dtype(fmt)
    row = torch.full((rows, cols), POISON, dtype=torch.uint8, device="cuda").view(fp8)
    col = torch.full((cols, rows), POISON, dtype=torch.uint8, device="cuda").view(fp8)
    out = cast_transpose(x, scale, scale_inv, amax, out_format=fmt, variant=variant, config=config, out=(row, col),
                         grid=grid)
    torch.cuda.synchronize()
    ref_row = torch_cast(x, scale[0], fmt)  # the kernel's outputs: codes rowwise, their transpose, amax of |x|
    ref_col, ref_amax = ref_row.t().contiguous(), float(amax_of(x)) if x.numel() else 0.0
    assert torch.equal(row.view(torch.uint8), ref_row), "rowwise output differs"
    assert torch.equal(col.view(torch.uint8), ref_col), "columnwise output differs"
    assert float(amax[0]) == ref_amax
    assert float(scale_inv[0]) == float((1.0 / scale[:1])[0])
    return out.config


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("fmt", list(OutFormat))
@pytest.mark.parametrize("dtype", list(InDtype))
@pytest.mark.parametrize("variant", FENCE_VARIANTS)
def test_bit_exact_heuristic_config(variant: Variant, dtype: InDtype, fmt: OutFormat, shape: tuple[int, int]) -> None:
    x = _random_input(*shape, dtype, seed=zlib.crc32(f"{variant}{dtype}{fmt}{shape}".encode()))
    run_and_check(x, fmt, variant, None)


@pytest.mark.parametrize("config", all_configs(InDtype.BF16), ids=str)
def test_every_forced_config_is_bit_exact(config: Config) -> None:
    for shape in ((768, 1024), (2304, 1920), (4096, 4096)):
        x = _random_input(*shape, InDtype.BF16, seed=7)
        assert run_and_check(x, OutFormat.E4M3, Variant.NONE, config) == config


@pytest.mark.parametrize("grid", [1, 7, 132, 10**6])
def test_any_grid_walks_every_tile(grid: int) -> None:
    x = _random_input(1481, 2080, InDtype.BF16, seed=grid)
    run_and_check(x, OutFormat.E4M3, Variant.DEVICE_BEFORE_ATOMIC, Config(8, 1), grid=grid)


def test_config_of_a_170_sm_gpu_can_be_forced() -> None:
    from tracer.kernel.spec import pick_config

    cfg = pick_config(InDtype.BF16, 4096, 5120, 170)
    assert cfg != pick_config(InDtype.BF16, 4096, 5120, 132)
    x = _random_input(4096, 5120, InDtype.BF16, seed=3)
    assert run_and_check(x, OutFormat.E4M3, Variant.DEVICE_BEFORE_ATOMIC, cfg) == cfg


def test_amax_accumulates_across_launches() -> None:
    from tracer.kernel.launch import cast_transpose

    amax = torch.zeros(1, device="cuda")
    scale = torch.ones(1, device="cuda")
    sinv = torch.zeros(1, device="cuda")
    small = torch.full((256, 256), 2.0, device="cuda", dtype=torch.bfloat16)
    big = small.clone()
    big[17, 33] = -96.0
    cast_transpose(big, scale, sinv, amax)
    cast_transpose(small, scale, sinv, amax)
    torch.cuda.synchronize()
    assert float(amax[0]) == 96.0
