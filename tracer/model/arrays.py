"""Set operations on 1-D arrays by sorting. `np.unique(x)` without options and `np.intersect1d`
import numpy.ma on their first call (about 19 ms, a tenth of `trace analyze`'s start-up on a small
trace; issue 27): readers and analysis call these instead. `np.unique` with return_index,
return_inverse or return_counts sorts and imports nothing more, so it stays where it is."""
from __future__ import annotations

import numpy as np


def unique(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D array, as `np.unique(values)` gives them (NaNs count
    as one value, last)."""
    s = np.sort(np.asarray(values).reshape(-1))
    if len(s) == 0:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    if s.dtype.kind in "fc":  # NaN != NaN: keep only the first of the NaNs sorted to the end
        nan = np.isnan(s)
        keep[1:] &= ~(nan[1:] & nan[:-1])
    return s[keep]


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct values found in both arrays, as `np.intersect1d(a, b)` gives them."""
    ua, ub = unique(a), unique(b)
    dtype = np.result_type(ua, ub)
    if len(ua) == 0 or len(ub) == 0:
        return np.zeros(0, dtype=dtype)
    at = np.minimum(np.searchsorted(ub, ua), len(ub) - 1)
    both: np.ndarray = ua[ub[at] == ua]
    return both.astype(dtype, copy=False)
