from __future__ import annotations

import math

import pytest
import torch

from tracer.fp8.detector import (Check, Detector, Measure, Rule, Where, codes_mismatch, exact_diff, norm_ratio, summarize,
                             relative_error)
from tracer.fp8.ref import torch_cast
from tracer.kernel.spec import OutFormat


def _pair(m: Measure) -> tuple[bool, float]:
    assert m.value.numel() == 1  # one device value per comparison, judged on the host
    return m.judge(float(m.value))


def test_bit_flip_in_fp8_codes_is_caught() -> None:
    x = torch.randn(64, 64)
    ref = torch_cast(x, 2.0, OutFormat.E4M3)
    out = ref.clone()
    assert _pair(codes_mismatch(out, ref)) == (False, 0.0)
    out[3, 7] ^= 0x01  # one low mantissa bit
    out[60, 1] ^= 0x80  # one sign bit
    assert _pair(codes_mismatch(out, ref)) == (True, 2.0)


def test_huge_but_finite_gradient_is_flagged() -> None:
    ref = torch.randn(128, 128)
    out = ref.clone()
    assert _pair(norm_ratio(out, ref, 4.0)) == (False, 1.0)
    out[5, 5] = 3.0e4  # finite, but the norm explodes
    failed, ratio = _pair(norm_ratio(out, ref, 4.0))
    assert failed and math.isfinite(ratio) and ratio > 100
    failed, err = _pair(relative_error(out, ref, 0.02))
    assert failed and err > 1


def test_nan_and_inf_always_fail() -> None:
    ref = torch.randn(32, 32)
    out = ref.clone()
    out[0, 0] = float("nan")
    assert _pair(relative_error(out, ref, 0.02)) == (True, math.inf)
    assert _pair(norm_ratio(out, ref, 4.0)) == (True, math.inf)
    assert _pair(exact_diff(torch.tensor([float("nan")]), torch.tensor([1.0]))) == (True, math.inf)
    assert _pair(norm_ratio(ref / 10, ref, 4.0)) == (True, pytest.approx(0.1))  # too small fails as well


def test_small_rounding_passes_tolerance() -> None:
    ref = torch.randn(256, 256)
    out = ref.to(torch.bfloat16)
    failed, err = _pair(relative_error(out, ref, 0.02))
    assert not failed and 0 < err < 0.005


def test_summary_reports_worst_and_first_failure() -> None:
    d = Detector()
    d.add(Check.DGRAD, Where(0, 1, 0), Measure(torch.tensor(0.001), Rule.ABOVE, 0.02))
    d.add(Check.DGRAD, Where(2, 3, 1), Measure(torch.tensor(5.0), Rule.ABOVE, 0.02))
    d.add(Check.DGRAD, Where(1, 0, 0), Measure(torch.tensor(0.5), Rule.ABOVE, 0.02))
    d.add(Check.AMAX, Where(0, -1, -1), Measure(torch.tensor(0.0), Rule.NONZERO))
    d.flush()
    (amax, dgrad) = summarize(d.results)
    assert amax.passed and amax.comparisons == 1
    assert not dgrad.passed and dgrad.failures == 2 and dgrad.worst == 5.0
    assert str(dgrad.first_failure) == "step1/layer0/mb0"


def test_amax_reference_ignores_nan_and_keeps_inf_like_the_kernel() -> None:
    from tracer.fp8.ref import amax_of

    x = torch.tensor([1.0, float("nan"), -3.0, 2.5], dtype=torch.bfloat16)
    assert amax_of(x).item() == 3.0
    x[0] = float("-inf")
    assert amax_of(x).item() == math.inf
    assert amax_of(torch.full((4,), float("nan"))).item() == 0.0
