from __future__ import annotations

import pytest

from tracer.errors import UsageError
from tracer.kernel.spec import (
    FENCE_VARIANTS,
    Config,
    InDtype,
    KernelKey,
    OutFormat,
    Variant,
    all_configs,
    parse_arch,
    parse_variant,
    pick_config,
)


def test_config_parse_and_errors() -> None:
    assert Config.parse("16/8") == Config(16, 8)
    with pytest.raises(UsageError, match="LOAD/STORE"):
        Config.parse("16")
    with pytest.raises(UsageError, match="store width 3 is not one of 1, 2, 4, 8, 16"):
        Config.parse("16/3")


def test_unknown_names_list_allowed_values() -> None:
    with pytest.raises(UsageError, match=r"unknown variant 'fence' \(allowed: none, device_before_atomic"):
        parse_variant("fence")
    with pytest.raises(UsageError, match=r"unknown arch 'sm_75' \(allowed: sm_89, sm_90"):
        parse_arch("sm_75")


def test_config_that_does_not_divide_says_why() -> None:
    with pytest.raises(UsageError, match=r"8-element bf16 loads need cols % 8 == 0, got cols=677"):
        Config(16, 1).check_shape(InDtype.BF16, 1481, 677)
    with pytest.raises(UsageError, match=r"columnwise stores need rows % 16 == 0, got rows=120"):
        Config(2, 16).check_shape(InDtype.BF16, 120, 2080)
    with pytest.raises(UsageError, match="narrower than one fp32 element"):
        Config(2, 2).check_shape(InDtype.FP32, 64, 64)


@pytest.mark.parametrize("dtype", list(InDtype))
@pytest.mark.parametrize(
    "shape", [(2048, 12288), (768, 1024), (256, 65536), (65536, 128), (256, 256), (120, 2080), (1481, 677), (1, 3221), (2333, 1)]
)
@pytest.mark.parametrize("sms", [132, 170, 188])
def test_heuristic_always_fits_the_shape(dtype: InDtype, shape: tuple[int, int], sms: int) -> None:
    cfg = pick_config(dtype, *shape, sms)
    cfg.check_shape(dtype, *shape)  # never out of bounds: widths divide the shape


def test_heuristic_prefers_measured_patches_and_depends_on_sm_count() -> None:
    assert pick_config(InDtype.BF16, 8192, 8192, 132) == Config(8, 16)  # 4 bf16 x 16 rows per thread
    assert pick_config(InDtype.FP32, 8192, 8192, 132) == Config(16, 16)  # the same patch in fp32
    # 18x15 = 270 tiles of 128x128: fewer than fit at once (4 x SMs), and at least one per SM.
    for sms in (132, 170, 188):
        assert pick_config(InDtype.BF16, 2304, 1920, sms) == Config(8, 16)
    # 4096x4096: 1024 tiles of 128x128 would be a short second round on 132 SMs (528 at once), and
    # on 170 or 188 SMs: the 64x128 patch (2048 tiles) instead. On 300 SMs 1024 tiles fit at once.
    assert pick_config(InDtype.BF16, 4096, 4096, 132) == Config(8, 8)
    assert pick_config(InDtype.BF16, 4096, 4096, 188) == Config(8, 8)
    assert pick_config(InDtype.BF16, 4096, 4096, 300) == Config(8, 16)
    assert pick_config(InDtype.BF16, 3072, 3072, 132) == Config(8, 8)  # 576 tiles of 128x128
    assert pick_config(InDtype.BF16, 6144, 6144, 132) == Config(8, 16)  # 2304: over two rounds
    # 1280 tiles of 128x128: over two rounds on 132 SMs, a short second round on 170 or 188.
    assert pick_config(InDtype.BF16, 4096, 5120, 132) == Config(8, 16)
    assert pick_config(InDtype.BF16, 4096, 5120, 170) == pick_config(InDtype.BF16, 4096, 5120, 188) == Config(8, 8)
    # Fewer tiles than SMs for the wider preferred patches: the first that gives every SM one.
    assert pick_config(InDtype.BF16, 768, 1024, 132) == Config(8, 4)
    # No preferred patch divides 677 columns: every fitting config is a candidate.
    assert pick_config(InDtype.BF16, 1481, 677, 132) == Config(2, 1)


def test_default_grid_is_whole_waves_of_at_most_four_tiles_per_block() -> None:
    from tracer.kernel.launch import default_grid

    assert default_grid(528, 1024) == 528  # one wave, about 2 tiles per block
    assert default_grid(528, 2304) == 1056  # not 576 blocks: a second wave of 48 would run alone
    assert default_grid(528, 4096) == 1056
    assert default_grid(528, 100) == 100  # never more blocks than tiles
    assert default_grid(528, 528 * 4 * 3 + 1) == 528 * 4


def test_configs_and_tiles() -> None:
    cfgs = all_configs(InDtype.BF16)
    assert len(cfgs) == 20 and cfgs[0] == Config(16, 16)
    assert len(all_configs(InDtype.FP32)) == 15
    assert Config(16, 16).tile(InDtype.BF16) == (128, 256)
    assert Config(4, 2).tile(InDtype.FP32) == (16, 32)
    assert Config(16, 16).blocks(InDtype.BF16, 129, 128) == 2


def test_kernel_key_macros_name_exactly_one_variant() -> None:
    key = KernelKey(variant=Variant.DEVICE_BEFORE_ATOMIC, config=Config(16, 8), in_dtype=InDtype.FP16, out_format=OutFormat.E5M2, arch="sm_90")
    macros = dict(key.macros())
    assert macros["VARIANT_DEVICE_BEFORE_ATOMIC"] == "1"
    assert [k for k in macros if k.startswith("VARIANT_")] == ["VARIANT_DEVICE_BEFORE_ATOMIC"]
    assert (macros["ITYPE"], macros["OFMT"], macros["TILE_M"], macros["TILE_N"]) == ("1", "1", "64", "256")
    assert len(FENCE_VARIANTS) == 8
