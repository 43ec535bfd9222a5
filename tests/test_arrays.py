"""tracer.model.arrays against numpy's own set functions, on random and edge-case inputs: the
analysis calls them in place of `np.unique(x)` and `np.intersect1d` (which import numpy.ma)."""
from __future__ import annotations

import numpy as np
import pytest

from tracer.model.arrays import intersect, unique

RNG = np.random.default_rng(27)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # NaN equals NaN here


def _ints(n: int, high: int, dtype: type = np.int64) -> np.ndarray:
    return RNG.integers(-high, high, size=n).astype(dtype)


@pytest.mark.parametrize("n, high", [(0, 1), (1, 1), (2, 1), (50, 3), (1000, 10), (1000, 1 << 40), (5000, 1 << 62)])
def test_unique_matches_numpy_on_ints(n: int, high: int) -> None:
    for dtype in (np.int64, np.int32, np.uint8) if high <= 100 else (np.int64,):
        x = _ints(n, high, dtype)
        _same(unique(x), np.unique(x))


def test_unique_of_empty_keeps_the_dtype() -> None:
    for dtype in (np.int64, np.float64, bool):
        _same(unique(np.zeros(0, dtype=dtype)), np.unique(np.zeros(0, dtype=dtype)))


def test_unique_matches_numpy_on_floats_with_nans_and_infinities() -> None:
    x = RNG.integers(0, 5, size=200).astype(np.float64)
    x[RNG.integers(0, 200, size=30)] = np.nan
    x[:3] = [np.inf, -np.inf, -0.0]
    _same(unique(x), np.unique(x))
    _same(unique(np.full(4, np.nan)), np.unique(np.full(4, np.nan)))


def test_unique_matches_numpy_on_bools_strings_and_2d() -> None:
    flags = RNG.integers(0, 2, size=40).astype(bool)
    _same(unique(flags), np.unique(flags))
    _same(unique(np.ones(3, dtype=bool)), np.unique(np.ones(3, dtype=bool)))
    words = np.array(["b", "a", "ccc", "a", "", "b"])
    _same(unique(words), np.unique(words))
    grid = _ints(60, 4).reshape(6, 10)
    _same(unique(grid), np.unique(grid))  # flattened, as np.unique without axis


def test_unique_does_not_change_its_input() -> None:
    x = _ints(100, 5)
    before = x.copy()
    unique(x)
    _same(x, before)


@pytest.mark.parametrize("na, nb, high", [(0, 0, 1), (0, 5, 3), (5, 0, 3), (1, 1, 1), (100, 80, 10), (1000, 1000, 1 << 40), (300, 7, 20)])
def test_intersect_matches_numpy(na: int, nb: int, high: int) -> None:
    a, b = _ints(na, high), _ints(nb, high)
    _same(intersect(a, b), np.intersect1d(a, b))


def test_intersect_of_mixed_dtypes_and_nans_matches_numpy() -> None:
    a, b = _ints(50, 6, np.int32), _ints(40, 6)
    _same(intersect(a, b), np.intersect1d(a, b))
    _same(intersect(b, a), np.intersect1d(b, a))
    f = np.array([np.nan, 1.0, 2.0, np.nan, 3.0])
    _same(intersect(f, np.array([np.nan, 2.0, 3.0, 4.0])), np.intersect1d(f, np.array([np.nan, 2.0, 3.0, 4.0])))
    _same(intersect(np.zeros(0, dtype=np.int32), b), np.intersect1d(np.zeros(0, dtype=np.int32), b))
