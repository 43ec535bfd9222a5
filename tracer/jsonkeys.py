"""JSON objects with each key once: Python's json keeps the last of repeated keys silently, so a
second `traceEvents`, `failed` or `pid` would decide what tracer reads. Every JSON tracer reads
goes through `loads` (or passes `unique_keys` as object_pairs_hook)."""
from __future__ import annotations

import json
from typing import Any


class DuplicateKey(ValueError):
    """A JSON object names one key twice (a ValueError, as json's own decoding errors are)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]  # set.add returns None: the `or` marks k seen
        raise DuplicateKey(f"duplicate JSON key {key[:80]!r} (an object holds each key once)")
    return out


def loads(text: str | bytes) -> Any:
    return json.loads(text, object_pairs_hook=unique_keys)
