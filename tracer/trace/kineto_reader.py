"""Reads PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzipped, into the trace model.

Event edges come from `cuda_sync` events of kind "Stream Wait Event": the waiting stream, the
recording stream (`wait_on_stream`) and the record's correlation id, which becomes its key.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tracer.errors import TraceFormatError
from tracer.interner import Interner
from tracer.trace.model import Apis, EventRecord, Kernels, Ranges, Sync, SyncKind, Trace

SYNC_KINDS = {"Stream Wait Event": SyncKind.WAIT, "Stream Sync": SyncKind.STREAM,
              "Event Sync": SyncKind.EVENT, "Context Sync": SyncKind.CONTEXT}
RANGE_CATS = ("user_annotation", "cpu_op")


def load_json(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rt") as fh:  # type: ignore[operator]
            data = json.load(fh)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"{path}: not valid JSON, truncated or corrupt ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceFormatError(f"{path}: no traceEvents list (not a PyTorch profiler Chrome trace)")
    return data


def _ns(us: float) -> int:
    return int(round(float(us) * 1000))


def _arrays(rows: list[tuple[int, ...]], n: int) -> list[np.ndarray]:
    block = np.array(rows, dtype=np.int64).reshape(len(rows), n)
    return [np.ascontiguousarray(block[:, i]) for i in range(n)]


def read_kineto(path: Path) -> Trace:
    events = load_json(path)["traceEvents"]
    s = Interner()
    kernels, apis, ranges, syncs, records = [], [], [], [], {}
    memcpy = memset = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, args = e.get("cat"), e.get("args") or {}
        start, end = _ns(e.get("ts", 0)), _ns(e.get("ts", 0) + e.get("dur", 0))
        if cat == "kernel":
            kernels.append((start, end, args.get("device", 0), args.get("stream", -1), args.get("correlation", -1), s(e["name"])))
        elif cat in ("cuda_runtime", "cuda_driver"):
            apis.append((start, end, e.get("tid", -1), args.get("correlation", -1), s(e["name"])))
        elif cat in RANGE_CATS:
            ranges.append((start, end, e.get("tid", -1), s(e["name"])))
        elif cat == "cuda_sync":
            kind = SYNC_KINDS.get(args.get("cuda_sync_kind", e.get("name")), SyncKind.UNKNOWN)
            key = args.get("wait_on_cuda_event_record_corr_id", -1)
            if kind in (SyncKind.WAIT, SyncKind.EVENT) and key != -1:
                records[key] = EventRecord(args.get("device", 0), args.get("wait_on_stream", -1), key, key)
            stream = args.get("stream", -1) if kind in (SyncKind.WAIT, SyncKind.STREAM) else -1
            syncs.append(Sync(kind, args.get("device", 0), stream, args.get("correlation", -1), key, start, end, -1, e["name"]))
        elif cat == "gpu_memcpy":
            memcpy += 1
        elif cat == "gpu_memset":
            memset += 1
    kernels.sort()
    apis.sort(key=lambda a: a[3])
    ranges.sort()
    api = Apis(*_arrays(apis, 5))
    syncs = sorted(syncs, key=lambda y: y.corr)
    tids = api.index_of(np.array([y.corr for y in syncs], dtype=np.int64))
    syncs = [replace(y, tid=int(api.tid[i])) if i >= 0 else y for y, i in zip(syncs, tids)]
    return Trace(str(path), "pytorch-profiler (kineto)", s.items, Kernels(*_arrays(kernels, 6)), api,
                 Ranges(*_arrays(ranges, 4)), tuple(sorted(records.values(), key=lambda r: r.corr)), tuple(syncs),
                 memcpy, memset)
