from __future__ import annotations

import math

import pytest
import torch

from tracer.kernel.spec import OutFormat
from tracer.fp8.scaling import AmaxAlgo, Fp8Recipe, RecipeConfig, Role, ScalingState


@pytest.mark.parametrize("amax,fmt,margin,expect", [
    (2.0, OutFormat.E4M3, 0, 224.0), (2.0, OutFormat.E4M3, 1, 112.0), (57344.0, OutFormat.E5M2, 0, 1.0),
    (0.5, OutFormat.E5M2, 3, 14336.0), (0.0, OutFormat.E4M3, 0, 1.0), (math.inf, OutFormat.E4M3, 0, 1.0),
    (math.nan, OutFormat.E4M3, 0, 1.0), (-1.0, OutFormat.E4M3, 0, 1.0),
])
def test_scale_is_fp8_max_over_amax_over_two_to_the_margin(amax: float, fmt: OutFormat, margin: int, expect: float) -> None:
    """Hand values of scale = fp8_max / amax / 2^margin; zero, inf, NaN (or negative) keep the scale (1.0)."""
    st = ScalingState("t", fmt, RecipeConfig(margin=margin, amax_compute_algo=AmaxAlgo.MOST_RECENT), torch.device("cpu"))
    st.amax.fill_(amax)
    st.update()
    assert float(st.scale[0]) == expect


def test_hybrid_formats() -> None:
    assert Fp8Recipe.HYBRID.format_for(Role.GRAD_OUTPUT) is OutFormat.E5M2
    assert Fp8Recipe.HYBRID.format_for(Role.INPUT) is OutFormat.E4M3
    assert Fp8Recipe.E4M3.format_for(Role.GRAD_OUTPUT) is OutFormat.E4M3


@pytest.mark.parametrize("algo,expect", [(AmaxAlgo.MAX, [224.0, 112.0, 112.0, 112.0]),
                                         (AmaxAlgo.MOST_RECENT, [224.0, 112.0, 448.0, 448.0])])
def test_state_update_matches_hand_computation(algo: AmaxAlgo, expect: list[float]) -> None:
    st = ScalingState("t", OutFormat.E4M3, RecipeConfig(amax_history_len=3, amax_compute_algo=algo), torch.device("cpu"))
    got = []
    for amax in (2.0, 4.0, 1.0, 0.0):  # a zero amax: most_recent keeps the previous scale
        st.amax.fill_(amax)
        st.update()
        got.append(float(st.scale[0]))
        assert float(st.amax[0]) == 0.0
    assert got == expect and st.updates == 4
    assert st.history.tolist() == [0.0, 1.0, 4.0]  # length 3: the 2.0 has rolled out


@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_state_keeps_scale_on_non_finite_amax(bad: float) -> None:
    st = ScalingState("t", OutFormat.E5M2, RecipeConfig(amax_compute_algo=AmaxAlgo.MOST_RECENT), torch.device("cpu"))
    st.amax.fill_(8.0)
    st.update()
    assert float(st.scale[0]) == 57344.0 / 8.0
    st.amax.fill_(bad)
    st.update()
    assert float(st.scale[0]) == 57344.0 / 8.0
