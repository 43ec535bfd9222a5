"""Pair specs never pass by checking nothing, and never pair a kernel with itself (CUPTI captures
from an H200 in tests/data/traces, Kineto traces from ../shared/fixtures)."""
from __future__ import annotations

import json

import pytest

from tests.conftest import DATA, shared_fixture
from tracer.cli import main

CTD = DATA / "traces" / "cast_transpose_dgrad.sqlite"


def _analyze(capsys: pytest.CaptureFixture[str], source: str, *pairs: str) -> tuple[int, dict | None, str]:
    argv = ["trace", "analyze", source, "--json", "--fail-on-unordered"]
    for p in pairs:
        argv += ["--pairs", p]
    code = main(argv)
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else None, out.err


@pytest.mark.parametrize("spec,bad", [("nosuch/*:*/dgrad", "nosuch/*"), ("*/cast_transpose:*/dgrd", "*/dgrd"),
                                      ("step9/*:step9/*", "step9/*")])
def test_a_glob_that_matches_no_kernel_is_an_error_naming_close_names(capsys: pytest.CaptureFixture[str], spec: str, bad: str) -> None:
    code, data, err = _analyze(capsys, str(CTD), spec)
    assert code == 2 and data is None
    assert f"pair glob {bad!r} matches no NVTX range" in err and "closest: 'step" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_globs_that_form_no_pair_are_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """dgrad follows cast_transpose in every step: the reverse spec pairs nothing."""
    code, _, err = _analyze(capsys, str(CTD), "*/dgrad:*/cast_transpose")
    assert code == 2 and "formed no pair" in err


def test_control_a_matching_spec_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    code, data, _ = _analyze(capsys, str(CTD), "*/cast_transpose:*/dgrad")
    assert code == 0 and data["pair_counts"]["same-stream"] == 2 and data["pair_counts"]["unordered"] == 0


@pytest.mark.parametrize("spec", ["step1/*:step1/*", "*:*"])
def test_a_kernel_is_never_paired_with_itself(capsys: pytest.CaptureFixture[str], spec: str) -> None:
    """Same-name ranges pair with the previous one of that name, ordered by stream order; all on one stream."""
    code, data, err = _analyze(capsys, str(CTD), spec)
    assert code == 0, err
    assert data["pair_counts"]["unordered"] == 0 and data["pair_counts"]["same-stream"] >= 2
    for p in data["pairs"]:
        assert p["verdict"] == "same-stream" and p["gap_ns"] >= 0
        assert p["producer"] == p["consumer"]  # e.g. step1/layer0/mb0/check, one instance after another


def test_same_named_ranges_on_other_streams_are_real_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    trace = shared_fixture("kineto", "event_sync_multi_stream.json.gz")
    code, data, err = _analyze(capsys, str(trace), "*mm:*mm")
    assert data is not None, err
    assert data["pairs"] and all(p["producer_stream"] != p["consumer_stream"] for p in data["pairs"])
    assert code == (1 if data["pair_counts"]["unordered"] else 0)
