"""Idle time per stream against HolisticTraceAnalysis itself, on HTA's own Kineto test traces kept
in ../shared/fixtures/kineto (scripts/peer_hta.py computes both sides; docs/benchmarks.md has the
larger traces). Operations are kernels, copies and memsets on both sides. Skipped when HTA is not
installed (pip install HolisticTraceAnalysis) or the shared fixtures are absent."""
from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import pytest

from tests.conftest import shared_fixture

ROOT = Path(__file__).resolve().parent.parent


def peer_hta():
    spec = importlib.util.spec_from_file_location("peer_hta", ROOT / "scripts" / "peer_hta.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]  # a file spec always has a loader
    return module


@pytest.mark.parametrize("name", ["event_sync.json.gz", "event_sync_multi_stream.json.gz"])
def test_idle_and_host_wait_per_stream_within_one_percent_of_hta(name: str) -> None:
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install HolisticTraceAnalysis)")
    path = shared_fixture("kineto", name)
    peer = peer_hta()
    logging.disable(logging.WARNING)
    try:
        hta, ours = peer.hta_numbers(path), peer.tracer_numbers(path)
    finally:
        logging.disable(logging.NOTSET)
    assert set(ours["streams"]) == set(hta["streams"]) and hta["streams"]
    for stream, h in hta["streams"].items():
        t = ours["streams"][stream]
        assert t["idle_us"] == pytest.approx(h["idle_us"], rel=0.01), stream
        assert t["host_wait_us"] == pytest.approx(h["host_wait_us"], rel=0.01, abs=0.5), stream
        assert t["hta_formula_us"] == pytest.approx(h["idle_us"], abs=1e-6), stream  # HTA's definition on our operations
    assert ours["overlap_pct"] is None  # no collective in these traces: nothing to overlap
