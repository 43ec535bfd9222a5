"""The torch reference cast agrees with the pure-Python encoder on edge values."""
from __future__ import annotations

import math
import struct

import pytest
import torch

from tracer.fp8.ref import decode, py_cast, torch_cast
from tracer.kernel.spec import OutFormat

EDGES = [
    0.0, -0.0, 1.0, -1.0, 0.3, -0.3, 448.0, 449.0, 464.0, 480.0, 500.0, 57344.0, 61440.0, 1e30, -1e30,
    math.inf, -math.inf, 2.0**-6, 2.0**-7, 2.0**-9, 2.0**-10, 1.5 * 2.0**-9, 2.0**-14, 2.0**-16, 2.0**-17,
    1.5 * 2.0**-16, 3 * 2.0**-18, 2.0**-20, 1e-45, 240.0, 232.0, 248.0, 0.0625 + 2.0**-8,
]


def _f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


@pytest.mark.parametrize("fmt", list(OutFormat))
def test_torch_reference_matches_pure_python_on_edges(fmt: OutFormat) -> None:
    values = [_f32(v) for v in EDGES]
    got = torch_cast(torch.tensor(values, dtype=torch.float32), 1.0, fmt).tolist()
    assert got == [py_cast(v, fmt) for v in values]


@pytest.mark.parametrize("fmt", list(OutFormat))
def test_saturation_nan_negative_zero_and_subnormals(fmt: OutFormat) -> None:
    top = py_cast(fmt.max_finite, fmt)
    assert decode(top, fmt) == fmt.max_finite == (448.0 if fmt is OutFormat.E4M3 else 57344.0)
    for big in (fmt.max_finite * 1.1, 1e30, math.inf):
        assert py_cast(big, fmt) == top and py_cast(-big, fmt) == top | 0x80
    assert math.isnan(decode(py_cast(math.nan, fmt), fmt))
    assert py_cast(-0.0, fmt) == 0x80 and py_cast(0.0, fmt) == 0x00
    smallest = 2.0 ** (-9 if fmt is OutFormat.E4M3 else -16)
    assert py_cast(smallest, fmt) == 0x01 and decode(0x01, fmt) == smallest
    assert py_cast(smallest / 2, fmt) == 0x00  # a tie rounds to the even code 0
    assert py_cast(smallest * 1.5, fmt) == 0x02  # a tie between codes 1 and 2 rounds to even 2
    nan = int(torch_cast(torch.tensor([math.nan]), 1.0, fmt)[0])
    assert math.isnan(decode(nan, fmt))


@pytest.mark.parametrize("fmt", list(OutFormat))
def test_every_code_round_trips(fmt: OutFormat) -> None:
    for code in range(256):
        v = decode(code, fmt)
        if math.isfinite(v):
            assert py_cast(v, fmt) == code


def test_random_values_and_scale_agree() -> None:
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(4096, generator=gen) * 300).to(torch.bfloat16)
    for fmt in OutFormat:
        ref = torch_cast(x, 1.7, fmt).tolist()
        assert ref == [py_cast(_f32(float(v) * _f32(1.7)), fmt) for v in x.float().tolist()]
