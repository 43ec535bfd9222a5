"""What a stream timeline shows, computed from an Analysis: lanes of kernel bars coloured by NVTX
range family, NVTX lanes per CPU thread, event edges and producer -> consumer pairs. Big lanes are
aggregated (adjacent bars of one family merged below the pixel size, long outliers kept)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tracer.trace.analyze import Analysis
from tracer.trace.ordering import Verdict

FAMILIES = ("cast_transpose", "dgrad", "wgrad", "amax_update", "check", "other")
MAX_BARS_PER_LANE = 3000


@dataclass(frozen=True)
class Lane:
    label: str
    start_us: np.ndarray
    width_us: np.ndarray
    family: np.ndarray  # index into FAMILIES
    kernels: int  # kernels in the window before aggregation
    aggregated: bool


@dataclass(frozen=True)
class RangeLane:
    label: str
    start_us: np.ndarray
    width_us: np.ndarray
    depth: np.ndarray
    names: tuple[str, ...]


@dataclass(frozen=True)
class Arrow:
    x0_us: float
    lane0: int
    x1_us: float
    lane1: int
    kind: str  # "event", or a pair verdict
    label: str


@dataclass(frozen=True)
class TimelineData:
    title: str
    window_us: tuple[float, float]
    lanes: tuple[Lane, ...]
    range_lanes: tuple[RangeLane, ...]
    arrows: tuple[Arrow, ...]


def family_of(name: str) -> int:
    last = name.rsplit("/", 1)[-1]
    return FAMILIES.index(last) if last in FAMILIES else len(FAMILIES) - 1


def aggregate(start: np.ndarray, end: np.ndarray, fam: np.ndarray, pixel: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One bar per (pixel column, family) spanning its kernels; kernels longer than the lane's
    99.9th percentile stay on their own so outliers remain visible."""
    long = (end - start) > np.percentile(end - start, 99.9)
    col = np.floor((start - start.min()) / max(pixel, 1e-9)).astype(np.int64)
    key = np.where(long, -1 - np.arange(len(start)), col * 16 + fam)  # outliers get a key of their own
    order = np.lexsort((start, key))
    key_s = key[order]
    first = np.nonzero(np.r_[True, key_s[1:] != key_s[:-1]])[0]
    st = np.minimum.reduceat(start[order], first)
    en = np.maximum.reduceat(end[order], first)
    return st, en - st, fam[order][first]


def timeline_data(a: Analysis, window: tuple[float, float] | None = None, range_regex: str | None = None,
                  show_pairs: bool = True, width_px: int = 1600) -> TimelineData:
    t, k, attr = a.trace, a.trace.kernels, a.attribution
    t0 = int(k.start.min()) if len(k) else 0
    lo, hi = window or (0.0, float("inf"))
    rx = re.compile(range_regex) if range_regex else None
    names = np.array([t.strings[int(t.ranges.text[r])] if r >= 0 else "" for r in attr.range_of_kernel], dtype=object)
    fam = np.array([family_of(n) for n in names], dtype=np.int64)
    s_us, e_us = (k.start - t0) / 1e3, (k.end - t0) / 1e3
    keep = (e_us >= lo) & (s_us <= hi)
    if rx is not None:
        keep &= np.array([bool(rx.search(n)) for n in names])
    hi_eff = float(e_us[keep].max()) if keep.any() else lo + 1.0
    lo_eff = max(lo, float(s_us[keep].min())) if keep.any() else lo
    pixel = (min(hi, hi_eff) - lo_eff) / width_px
    lanes, lane_of = [], {}
    for dev, stream in sorted({(int(d), int(s)) for d, s in zip(k.device, k.stream)}):
        idx = np.nonzero(keep & (k.device == dev) & (k.stream == stream))[0]
        idx = idx[np.argsort(s_us[idx], kind="stable")]
        st, en, fm = s_us[idx], e_us[idx], fam[idx]
        agg = len(idx) > MAX_BARS_PER_LANE
        if agg:
            st, wd, fm = aggregate(st, en, fm, pixel)
        else:
            wd = en - st
        wd = np.maximum(wd, pixel)  # every kernel at least one pixel wide
        lane_of[(dev, stream)] = len(lanes)
        lanes.append(Lane(f"GPU{dev} stream {stream}", st, wd, fm, len(idx), agg))
    ranges = _range_lanes(a, t0, lo_eff, min(hi, hi_eff), rx)
    arrows = _event_arrows(a, t0, lane_of) + (_pair_arrows(a, t0, lane_of) if show_pairs else [])
    w0, w1 = lo_eff, min(hi, hi_eff)
    arrows = [ar for ar in arrows if w0 <= ar.x1_us <= w1 or w0 <= ar.x0_us <= w1]
    return TimelineData(Path(t.source).name, (lo_eff, min(hi, hi_eff)), tuple(lanes), ranges, tuple(arrows))


def _range_lanes(a: Analysis, t0: int, lo: float, hi: float, rx: re.Pattern[str] | None) -> tuple[RangeLane, ...]:
    r, t = a.trace.ranges, a.trace
    out = []
    for tid in np.unique(r.tid):
        idx = np.nonzero((r.tid == tid) & (r.end >= 0))[0]
        st, en = (r.start[idx] - t0) / 1e3, (r.end[idx] - t0) / 1e3
        sel = (en >= lo) & (st <= hi)
        if rx is not None:
            sel &= np.array([bool(rx.search(t.strings[int(i)])) for i in r.text[idx]], dtype=bool)
        sel_idx = np.nonzero(sel)[0]
        names = [t.strings[int(i)] for i in r.text[idx[sel_idx]]]
        st, en = st[sel_idx], en[sel_idx]
        depth = _depths(st, en)
        if len(st) > MAX_BARS_PER_LANE:  # one bar per (pixel column, depth), names dropped
            st, wd, depth = aggregate(st, en, depth, (hi - lo) / 1600)
            out.append(RangeLane(f"CPU thread {int(tid) & 0xFFFFFF} (aggregated)", st, wd, depth, ()))
            continue
        out.append(RangeLane(f"CPU thread {int(tid) & 0xFFFFFF}", st, en - st, depth, tuple(names)))
    return tuple(out)


def _depths(st: np.ndarray, en: np.ndarray) -> np.ndarray:
    order = np.argsort(st, kind="stable")
    depth = np.zeros(len(st), dtype=np.int64)
    stack: list[float] = []
    for i in order:
        while stack and stack[-1] <= st[i]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(en[i])
    return depth


StreamIndex = dict[int, tuple[np.ndarray, np.ndarray]]  # stream -> (kernel indices, their corr), by corr


def stream_index(a: Analysis) -> StreamIndex:
    k = a.trace.kernels
    out: StreamIndex = {}
    for stream in np.unique(k.stream):
        idx = np.nonzero(k.stream == stream)[0]
        idx = idx[np.argsort(k.corr[idx], kind="stable")]
        out[int(stream)] = (idx, k.corr[idx])
    return out


def kernel_at(index: StreamIndex, stream: int, corr: int, after: bool) -> int | None:
    """The first kernel on the stream submitted after corr (or the last before it)."""
    if stream not in index:
        return None
    idx, corrs = index[stream]
    pos = int(np.searchsorted(corrs, corr))
    if after:
        return int(idx[pos]) if pos < len(idx) else None
    return int(idx[pos - 1]) if pos > 0 else None


def event_edges(a: Analysis) -> list[tuple[int, int, object, object]]:
    """(last kernel before the record, first kernel after the wait, record, wait) per event edge."""
    recs = {r.key: r for r in a.trace.records}
    index = stream_index(a)
    out = []
    for y in a.trace.syncs:
        r = recs.get(y.key)
        if y.kind.value != "wait" or r is None:
            continue
        p, c = kernel_at(index, r.stream, r.corr, after=False), kernel_at(index, y.stream, y.corr, after=True)
        if p is not None and c is not None:
            out.append((p, c, r, y))
    return out


def _event_arrows(a: Analysis, t0: int, lane_of: dict[tuple[int, int], int]) -> list[Arrow]:
    """Each event edge drawn from the last kernel before the record to the first kernel after the wait."""
    k, out = a.trace.kernels, []
    for p, c, r, y in event_edges(a):
        if (r.device, r.stream) not in lane_of or (y.device, y.stream) not in lane_of:
            continue
        out.append(Arrow((k.end[p] - t0) / 1e3, lane_of[(r.device, r.stream)], (k.start[c] - t0) / 1e3,
                         lane_of[(y.device, y.stream)], "event", f"event {y.key}"))
    return out


def _pair_arrows(a: Analysis, t0: int, lane_of: dict[tuple[int, int], int]) -> list[Arrow]:
    k, out = a.trace.kernels, []
    by_name = {}
    for i, rng in enumerate(a.attribution.range_of_kernel):
        if rng >= 0:
            by_name.setdefault(a.trace.strings[int(a.trace.ranges.text[rng])], []).append(i)
    for p in a.pairs:
        if p.producer_stream == p.consumer_stream:  # stream order is the lane itself
            continue
        ps, cs = by_name.get(p.producer), by_name.get(p.consumer)
        if not ps or not cs:
            continue
        pi, ci = max(ps, key=lambda i: k.end[i]), min(cs, key=lambda i: k.start[i])
        out.append(Arrow((k.end[pi] - t0) / 1e3, lane_of[(int(k.device[pi]), int(k.stream[pi]))], (k.start[ci] - t0) / 1e3,
                         lane_of[(int(k.device[ci]), int(k.stream[ci]))], p.verdict.value,
                         f"{p.producer} -> {p.consumer}" + (" UNORDERED" if p.verdict is Verdict.UNORDERED else "")))
    return out
