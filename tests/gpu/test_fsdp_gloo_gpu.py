"""On a GPU (issue #26, third round): FSDP2 with NCCL at world size 1, DDP with gloo across two ranks
sharing the one GPU (torchrun), and the memory capture window opened by NVTX ranges of every API
(the nvtx package's Domain methods, C through ctypes). The 2-GPU kind is not lent: NCCL across
ranks is not run here."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memory_tables import PROGRAMS
from tracer.cli import main

pytestmark = pytest.mark.gpu
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
NVTX_WINDOW = {"win_domain_push", "win_domain_start", "win_c_push", "win_c_start", "win_c_domain", "win_c_registered"}


def traced(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], *extra: str) -> tuple[int, dict]:
    run = tmp_path / "run"
    code = main(["trace", "run", "--memory", "--fail-on-hazard", *extra, "-o", str(run), "--json", "--", *command])
    return code, json.loads(capsys.readouterr().out)


def counts(h: dict) -> dict[str, int]:
    return {k: h["counts"][k] for k in ("RAW", "WAR", "WAW", "reuse")}


def ranges(z: dict) -> set[str]:
    return {z["producer"]["range"] or "", z["consumer"]["range"] or ""}


def test_fsdp_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = traced(tmp_path, capsys, [sys.executable, str(PROGRAMS / "fsdp_train.py")])
    h = verdict["hazards"]
    assert counts(h) == {"RAW": 0, "WAR": 0, "WAW": 0, "reuse": 0}, h["listed"][:3]
    assert h["not_judged"] == [] and code == 0, h["not_judged"]
    cov = {c["kind"]: c for c in h["coverage"]}
    assert cov["collective"]["seen"] > 0 or cov["memcpy"]["seen"] > 0, cov  # FSDP's all-gathers took part


def test_fsdp_with_a_collective_given_no_wait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = traced(tmp_path, capsys, [sys.executable, str(PROGRAMS / "fsdp_train.py"), "--planted"])
    h = verdict["hazards"]
    assert h["counts"]["RAW"] >= 2 and code != 0, h["counts"]
    assert all(any(r.startswith("planted") for r in ranges(z)) for z in h["listed"]), h["listed"][:3]  # none in FSDP's steps
    assert any((z["consumer"]["op"] or "").startswith("c10d::") for z in h["listed"]), h["listed"][:3]
    assert h["not_judged"] == [], h["not_judged"]


def ranks(verdict: dict) -> list[dict]:
    out = [a for a in verdict["analyses"] if a["kernels"]]
    assert len(out) == 2 and verdict["complete"], [(a["process"], a["outcome"]) for a in verdict["analyses"]]
    return out


def test_gloo_ddp_across_ranks_sharing_the_gpu_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = traced(tmp_path, capsys, [*TORCHRUN, str(PROGRAMS / "gloo_ddp.py")])
    for a in ranks(verdict):
        h = a["hazards"]
        assert counts(h) == {"RAW": 0, "WAR": 0, "WAW": 0, "reuse": 0}, (a["process"], h["listed"][:3])
        assert h["not_judged"] == [], (a["process"], h["not_judged"])
    assert code == 0


def test_gloo_collective_given_no_wait_is_found_on_each_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = traced(tmp_path, capsys, [*TORCHRUN, str(PROGRAMS / "gloo_ddp.py"), "--planted"])
    for a in ranks(verdict):
        h = a["hazards"]
        assert h["counts"]["RAW"] >= 2, (a["process"], h["counts"])
        assert all((z["producer"]["range"] or "").startswith("planted") for z in h["listed"]), (a["process"], h["listed"][:3])
        assert {z["kind"] for z in h["listed"]} <= {"RAW", "WAW"}, (a["process"], h["listed"][:3])  # copy out, copy back
        assert h["not_judged"] == [], (a["process"], h["not_judged"])
    assert code != 0


def test_nvtx_ranges_of_every_api_open_the_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = traced(tmp_path, capsys, [sys.executable, str(PROGRAMS / "nvtx_apis_window.py")],
                           "--memory-range", "win*")
    h = verdict["hazards"]
    assert h["counts"]["RAW"] == len(NVTX_WINDOW) and h["counts"]["WAR"] == h["counts"]["WAW"] == 0, h["counts"]
    assert {z["producer"]["range"] for z in h["listed"]} == NVTX_WINDOW, h["listed"]
    out = {c["kind"]: c for c in h["coverage"]}["outside-window"]
    assert out["unjudged"] > 0 and code != 0, out  # the race in `other`, outside the window: not judged, never clean
