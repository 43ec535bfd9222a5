"""An interactive timeline's data: every kernel of a run in lanes (one per rank, device and stream,
plus NVTX lanes per thread), asked for by time window with a cap on what comes back (level of
detail): a window holding more operations than the cap comes back as bins (per lane, per time
column: how many operations, their first start and last end, the name of the first), so a
1M-kernel trace answers in milliseconds once its lanes are built. Lanes are built from the trace
through the reader the commands use, then kept as one .npz per trace file (tracer/store/atomic).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracer.artifact import JobRun, TraceRun, open_artifact
from tracer.errors import TraceFormatError, UsageError
from tracer.store import atomic

CACHE_VERSION = 1
MAX_OPS = 20_000  # the most a request may ask for
SEARCH_HITS = 200


@dataclass(frozen=True, kw_only=True)
class Lanes:
    """Operations grouped by lane, sorted by start within each lane; times in ns from `origin`."""

    labels: tuple[str, ...]
    kinds: tuple[str, ...]  # "stream" or "nvtx" per lane
    streams: tuple[int, ...]  # per lane: the stream (-1 for NVTX lanes)
    processes: tuple[str, ...]  # per lane: the job process label ("" for a single trace)
    offsets: np.ndarray  # lane i holds rows offsets[i]:offsets[i+1]
    start: np.ndarray
    end: np.ndarray
    name: np.ndarray  # index into names
    corr: np.ndarray  # correlation id (-1 for NVTX)
    max_dur: np.ndarray  # per lane: the longest operation (for window lookups)
    names: tuple[str, ...]
    origin: int  # absolute ns of time 0 (the trace's own clock; a job's wall clock)
    process_offsets: dict[str, int]  # job process label -> ns added to its own clock

    @property
    def kernels(self) -> int:
        return int(sum(self.offsets[i + 1] - self.offsets[i] for i, k in enumerate(self.kinds) if k == "stream"))

    @property
    def span(self) -> int:
        return int(self.end.max()) if len(self.end) else 0


# ---- building lanes from a run ----------------------------------------------------------------

def _parts(path: Path) -> list[tuple[str, Any, int]]:
    """(process label, trace, ns to add to its clock) for each trace of the run."""
    art = open_artifact(path)
    if isinstance(art, TraceRun):
        return [("", art.load(), 0)]
    if isinstance(art, JobRun):
        job = art.load()
        return [(p.label, t, p.clock.offset_ns or 0) for p, t in job.traced()]
    raise TraceFormatError(f"{path}: no trace in this run, so no timeline")


def build_lanes(path: Path) -> Lanes:
    rows: list[tuple[str, str, int, str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    names: dict[str, int] = {}
    offsets: dict[str, int] = {}
    for label, trace, shift in _parts(path):
        offsets[label] = shift
        ids = np.array([names.setdefault(s, len(names)) for s in trace.strings], dtype=np.int64)
        k = trace.kernels
        prefix = f"{label} " if label else ""
        for dev, stream in sorted(set(zip(k.device.tolist(), k.stream.tolist()))):
            sel = np.flatnonzero((k.device == dev) & (k.stream == stream))
            rows.append((f"{prefix}GPU {dev} stream {stream}", "stream", int(stream), label, k.start[sel] + shift,
                         k.end[sel] + shift, ids[k.name[sel]] if len(ids) else k.name[sel], k.corr[sel]))
        r = trace.ranges
        for tid in sorted(set(r.tid.tolist())):
            sel = np.flatnonzero((r.tid == tid) & (r.end >= 0))
            rows.append((f"{prefix}NVTX thread {tid}", "nvtx", -1, label, r.start[sel] + shift, r.end[sel] + shift,
                         ids[r.text[sel]], np.full(len(sel), -1, dtype=np.int64)))
    return _assemble(rows, tuple(names), offsets)


def _assemble(rows: list[Any], names: tuple[str, ...], process_offsets: dict[str, int]) -> Lanes:
    rows = [r for r in rows if len(r[4])]
    if not any(r[1] == "stream" for r in rows):
        raise TraceFormatError("the trace holds no kernels: nothing to draw")
    origin = int(min(int(r[4].min()) for r in rows))
    parts = []
    for r in rows:
        order = np.argsort(r[4], kind="stable")
        parts.append([np.asarray(a, dtype=np.int64)[order] for a in (r[4] - origin, r[5] - origin, r[6], r[7])])
    sizes = np.array([len(p[0]) for p in parts], dtype=np.int64)
    cat = [np.concatenate([p[i] for p in parts]) for i in range(4)]
    max_dur = np.array([int((p[1] - p[0]).max()) for p in parts], dtype=np.int64)
    return Lanes(labels=tuple(r[0] for r in rows), kinds=tuple(r[1] for r in rows), streams=tuple(r[2] for r in rows),
                 processes=tuple(r[3] for r in rows), offsets=np.concatenate([[0], np.cumsum(sizes)]), start=cat[0], end=cat[1], name=cat[2],
                 corr=cat[3],
                 max_dur=max_dur, names=names, origin=origin, process_offsets=process_offsets)


# ---- the cache ----------------------------------------------------------------------------------

def _sources(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in [path / "trace.sqlite", *(path / "procs").glob("*.sqlite")] if p.is_file())


def cache_key(path: Path) -> str:
    h = hashlib.sha1(f"{CACHE_VERSION}:{path}".encode())
    for src in _sources(path):
        st = src.stat()
        h.update(f"{src.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def cached_lanes(path: Path, cache_dir: Path | None) -> Lanes:
    """The run's lanes from the cache when its traces did not change, else built and stored."""
    file = cache_dir / f"{cache_key(path)}.npz" if cache_dir is not None else None
    if file is not None and file.is_file():
        try:
            return _load(file)
        except (OSError, ValueError, KeyError):
            file.unlink(missing_ok=True)
    lanes = build_lanes(path)
    if file is not None:
        _save(file, lanes)
    return lanes


def _save(file: Path, lanes: Lanes) -> None:
    meta = {"labels": lanes.labels, "kinds": lanes.kinds, "streams": lanes.streams, "processes": lanes.processes,
            "names": lanes.names, "origin": lanes.origin, "process_offsets": lanes.process_offsets}
    with atomic.atomic_output(file) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, offsets=lanes.offsets, start=lanes.start, end=lanes.end, name=lanes.name, corr=lanes.corr,
                 max_dur=lanes.max_dur, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))


def _load(file: Path) -> Lanes:
    with np.load(file, allow_pickle=False) as z:
        meta = json.loads(z["meta"].tobytes())
        return Lanes(labels=tuple(meta["labels"]), kinds=tuple(meta["kinds"]), streams=tuple(meta["streams"]), processes=tuple(meta["processes"]),
                     offsets=z["offsets"], start=z["start"], end=z["end"], name=z["name"], corr=z["corr"], max_dur=z["max_dur"],
                     names=tuple(meta["names"]),
                     origin=int(meta["origin"]), process_offsets={str(k): int(v) for k, v in meta["process_offsets"].items()})


# ---- queries ------------------------------------------------------------------------------------

def window(lanes: Lanes, start: int | None, end: int | None, max_ops: int) -> dict[str, Any]:
    """The operations in [start, end) (ns from origin; None: the whole trace), at most max_ops
    items: single operations when they fit, else bins per lane and time column."""
    if not 1 <= max_ops <= MAX_OPS:
        raise UsageError(f"max={max_ops} must be between 1 and {MAX_OPS}")
    t0 = 0 if start is None else int(start)
    t1 = lanes.span if end is None else int(end)
    if t1 <= t0:
        raise UsageError(f"start={t0} must be below end={t1}")
    picks = [_in_window(lanes, i, t0, t1) for i in range(len(lanes.labels))]
    total = sum(len(p) for p in picks)
    busy = sum(1 for p in picks if len(p))
    ops: dict[str, list[int]] = {"lane": [], "s": [], "e": [], "n": [], "name": [], "corr": []}
    for i, idx in enumerate(picks):
        if total > max_ops and len(idx) > max(1, max_ops // max(busy, 1)):
            _bins(lanes, i, idx, t0, t1, max(1, max_ops // max(busy, 1)), ops)
        else:
            _singles(lanes, i, idx, ops)
    used = sorted(set(ops["name"]))
    return {"origin": lanes.origin, "start": t0, "end": t1, "span": lanes.span, "total": total,
            "items": len(ops["s"]), "aggregated": total > len(ops["s"]) or any(n > 1 for n in ops["n"]),
            "lanes": _lane_json(lanes), "ops": ops, "names": {str(n): lanes.names[n] for n in used}}


def _lane_json(lanes: Lanes) -> list[dict[str, Any]]:
    return [{"label": lanes.labels[i], "kind": lanes.kinds[i], "stream": lanes.streams[i],
             "process": lanes.processes[i], "count": int(lanes.offsets[i + 1] - lanes.offsets[i])}
            for i in range(len(lanes.labels))]


def _in_window(lanes: Lanes, lane: int, t0: int, t1: int) -> np.ndarray:
    lo, hi = int(lanes.offsets[lane]), int(lanes.offsets[lane + 1])
    s = lanes.start[lo:hi]
    a = int(np.searchsorted(s, t0 - int(lanes.max_dur[lane]), side="left"))
    b = int(np.searchsorted(s, t1, side="left"))
    idx = np.arange(lo + a, lo + b)
    return idx[lanes.end[idx] > t0]


def _singles(lanes: Lanes, lane: int, idx: np.ndarray, ops: dict[str, list[int]]) -> None:
    ops["lane"] += [lane] * len(idx)
    ops["s"] += lanes.start[idx].tolist()
    ops["e"] += lanes.end[idx].tolist()
    ops["n"] += [1] * len(idx)
    ops["name"] += lanes.name[idx].tolist()
    ops["corr"] += lanes.corr[idx].tolist()


def _bins(lanes: Lanes, lane: int, idx: np.ndarray, t0: int, t1: int, columns: int, ops: dict[str, list[int]]) -> None:
    """Per time column: count, first start, last end, first name (starts are sorted, so columns are runs)."""
    s, e = lanes.start[idx], lanes.end[idx]
    col = np.clip((np.maximum(s, t0) - t0) * columns // (t1 - t0), 0, columns - 1)
    cuts = np.flatnonzero(np.diff(col)) + 1
    heads = np.concatenate([[0], cuts])
    ops["lane"] += [lane] * len(heads)
    ops["s"] += s[heads].tolist()
    ops["e"] += np.maximum.reduceat(e, heads).tolist()
    ops["n"] += np.diff(np.concatenate([heads, [len(idx)]])).tolist()
    ops["name"] += lanes.name[idx[heads]].tolist()
    ops["corr"] += [-1] * len(heads)


def search(lanes: Lanes, text: str, limit: int = SEARCH_HITS) -> dict[str, Any]:
    """Operations whose name holds `text` (case-insensitive): how many, and the first `limit` by start."""
    if not text.strip():
        raise UsageError("q must be a non-empty text to look for in kernel and NVTX names")
    needle = text.lower()
    ids = np.array([i for i, n in enumerate(lanes.names) if needle in n.lower()], dtype=np.int64)
    rows = np.flatnonzero(np.isin(lanes.name, ids)) if len(ids) else np.zeros(0, dtype=np.int64)
    first = rows[np.argsort(lanes.start[rows], kind="stable")[:limit]]
    lane_of = np.searchsorted(lanes.offsets, first, side="right") - 1
    return {"q": text, "count": len(rows), "names": [lanes.names[i] for i in ids[:50]],
            "hits": [{"lane": int(lane_of[j]), "s": int(lanes.start[r]), "e": int(lanes.end[r]),
                      "name": lanes.names[int(lanes.name[r])]} for j, r in enumerate(first)]}
