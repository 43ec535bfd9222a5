"""On a GPU (issue #26): the memory capture window (`--memory-steps`), collectives judged through the
c10d ops that launch them, and CUDA-array copies counted as not judged."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memory_tables import PROGRAMS
from tracer.cli import main

pytestmark = pytest.mark.gpu


def traced(tmp_path: Path, capsys: pytest.CaptureFixture[str], program: str, *extra: str) -> tuple[int, dict, str]:
    run = tmp_path / "run"
    code = main(["trace", "run", "--memory", "--fail-on-hazard", *extra, "-o", str(run), "--json", "--", sys.executable,
                 str(PROGRAMS / f"{program}.py")])
    verdict = json.loads(capsys.readouterr().out)
    main(["trace", "analyze", str(run / "trace.sqlite")])
    return code, verdict, capsys.readouterr().out


def coverage(verdict: dict) -> dict[str, dict]:
    return {c["kind"]: c for c in verdict["hazards"]["coverage"]}


def test_window_judges_only_its_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict, text = traced(tmp_path, capsys, "window_steps", "--memory-steps", "1:3")
    h = verdict["hazards"]
    assert h["counts"]["RAW"] == 2 and h["counts"]["WAR"] == h["counts"]["WAW"] == 0, h["counts"]
    assert {z["producer"]["range"] for z in h["listed"]} == {"step1", "step2"}, h["listed"]
    out = coverage(verdict)["outside-window"]
    assert out["unjudged"] > 0 and out["window"] == "steps 1:3", out
    assert code != 0 and "outside the memory capture window (steps 1:3)" in text and "steps 1:3 only" in text


def test_collectives_get_memory_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The NCCL kernels and copies of c10d ops carry the ops' tensors: the planted RAW is found."""
    code, verdict, _ = traced(tmp_path, capsys, "collective_no_wait")
    h, cov = verdict["hazards"], coverage(verdict)
    assert h["counts"]["RAW"] >= 2 and code != 0, h["counts"]
    assert cov["collective"]["seen"] + cov["memcpy"]["seen"] > 0 and h["not_judged"] == [], cov
    assert any((z["consumer"]["op"] or "").startswith("c10d::") for z in h["listed"]), h["listed"][:3]


def test_ddp_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict, _ = traced(tmp_path, capsys, "collective_ddp")
    h = verdict["hazards"]
    assert h["counts"]["RAW"] == h["counts"]["WAR"] == h["counts"]["WAW"] == h["counts"]["reuse"] == 0, h["listed"][:3]
    assert h["not_judged"] == [] and code == 0, h["not_judged"]


def test_cuda_array_copy_is_not_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict, text = traced(tmp_path, capsys, "array_copy")
    h = verdict["hazards"]
    assert any("memcpy" in line and "CUDA array" in line for line in h["not_judged"]), h["not_judged"]
    assert code != 0 and "CUDA array" in text
