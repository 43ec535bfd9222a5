"""Reference FP8 casts: torch's float8 dtypes (fast, CPU or GPU) and a pure-Python encoder
(slow, obviously right) used to check the first on edge values.

Both follow the kernel's conversion: round to nearest even, saturate finite overflow and
infinities to the largest finite value, NaN stays NaN.
"""
from __future__ import annotations

import math
from functools import cache
from typing import TYPE_CHECKING

from tracer.kernel.spec import OutFormat

if TYPE_CHECKING:
    import torch

_BITS = {OutFormat.E4M3: (4, 3, 7), OutFormat.E5M2: (5, 2, 15)}  # exponent bits, mantissa bits, bias
NAN_CODE = {OutFormat.E4M3: 0x7F, OutFormat.E5M2: 0x7F}


def decode(code: int, fmt: OutFormat) -> float:
    """The value of an FP8 code (the NaN codes decode to nan; E5M2's 0x7c is inf)."""
    ebits, mbits, bias = _BITS[fmt]
    sign = -1.0 if code & 0x80 else 1.0
    exp = (code >> mbits) & ((1 << ebits) - 1)
    man = code & ((1 << mbits) - 1)
    if fmt is OutFormat.E4M3 and exp == 0xF and man == 0x7:
        return math.nan
    if fmt is OutFormat.E5M2 and exp == 0x1F:
        return sign * math.inf if man == 0 else math.nan
    if exp == 0:
        return sign * man * 2.0 ** (1 - bias - mbits)
    return sign * (1 + man / (1 << mbits)) * 2.0 ** (exp - bias)


@cache
def _finite_codes(fmt: OutFormat) -> tuple[tuple[float, int], ...]:
    """(value, code) of every finite non-negative code, ascending."""
    pairs = [(decode(c, fmt), c) for c in range(0x80)]
    return tuple(sorted((v, c) for v, c in pairs if math.isfinite(v)))


def py_cast(value: float, fmt: OutFormat) -> int:
    """Pure-Python saturating round-to-nearest-even encoder; returns the FP8 code."""
    if math.isnan(value):
        return NAN_CODE[fmt]
    sign = 0x80 if math.copysign(1.0, value) < 0 else 0
    mag = min(abs(value), fmt.max_finite)
    codes = _finite_codes(fmt)
    below = max((p for p in codes if p[0] <= mag), key=lambda p: p[0])
    above = min((p for p in codes if p[0] >= mag), key=lambda p: p[0])
    if below[0] == above[0]:
        return sign | below[1]
    d_lo, d_hi = mag - below[0], above[0] - mag
    if d_lo != d_hi:
        return sign | (below[1] if d_lo < d_hi else above[1])
    return sign | (below[1] if below[1] % 2 == 0 else above[1])


def torch_cast(x: torch.Tensor, scale: float | torch.Tensor, fmt: OutFormat) -> torch.Tensor:
    """x * scale in fp32, saturated, cast to FP8; returned as the uint8 codes."""
    import torch

    dtype = torch.float8_e4m3fn if fmt is OutFormat.E4M3 else torch.float8_e5m2
    y = x.float() * (scale if isinstance(scale, torch.Tensor) else torch.tensor(scale, dtype=torch.float32))
    y = y.clamp(-fmt.max_finite, fmt.max_finite)
    return y.to(dtype).view(torch.uint8)


def amax_of(x: torch.Tensor) -> torch.Tensor:
    """max |x| as the kernel reduces it (fmaxf: NaN ignored, inf kept), a 1-element float32 tensor on
    x's device; two passes and no host sync. x must not be empty."""
    import torch

    finite_or_inf = torch.nan_to_num(x, nan=0.0, posinf=float("inf"), neginf=float("-inf"))
    return torch.linalg.vector_norm(finite_or_inf, ord=float("inf")).float().reshape(1)
