"""Diff figures against nsys-ai's own `diff` on its fixtures kept in ../shared/fixtures/nsys
(scripts/peer_nsys_ai.py computes both sides; docs/benchmarks.md has its before/after pair): launch
counts, per-kernel totals and deltas, and the total kernel time per side, where both report them.
Skipped when nsys-ai is not installed (pip install nsys-ai) or a fixture is absent."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import SHARED, shared_fixture

ROOT = Path(__file__).resolve().parent.parent


def peer():
    if not (shutil.which("nsys-ai") or Path(sys.executable).with_name("nsys-ai").is_file()):
        pytest.skip("nsys-ai is not installed (pip install nsys-ai)")
    spec = importlib.util.spec_from_file_location("peer_nsys_ai", ROOT / "scripts" / "peer_nsys_ai.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]  # a file spec always has a loader
    return module


def test_totals_of_a_capture_against_itself_are_nsys_ais() -> None:
    path = shared_fixture("nsys", "h100_2gpu_1s.sqlite")
    out = peer().compare(path, path, log=lambda *_: None)
    assert out["totals"]["tracer"] == tuple(out["totals"]["nsys_ai"]) and out["totals"]["tracer"][0] > 0


def test_kernel_rows_of_a_before_and_after_pair_are_nsys_ais() -> None:
    before, after = SHARED / "nsys" / "mfu_2gpu_before.sqlite", SHARED / "nsys" / "mfu_2gpu_after.sqlite"
    if not (before.is_file() and after.is_file()):
        pytest.skip(f"nsys-ai's before/after fixtures are not in {SHARED / 'nsys'} (mfu_2gpu_before/after.sqlite "
                    "from GindaChen/nsys-ai tests/fixtures)")
    out = peer().compare(before, after, log=lambda *_: None)
    assert out["rows"] and out["unmatched"] == 0 and out["worst"] == 0.0
    assert out["totals"]["tracer"] == tuple(out["totals"]["nsys_ai"])
