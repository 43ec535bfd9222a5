"""On a GPU (issue #26): copies, memsets and CUDA graph launches judged like kernels. Each program of
tests/gpu/programs/ops_*.py runs under `tracer trace run --memory`; the verdict must report exactly
the hazard kinds the program plants (at least once per iteration or replay, never a kind it does not
plant), judge every operation it saw, and `--fail-on-hazard` must agree."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memory_tables import OPS_EITHER, OPS_EXPECTED, OPS_MAY, PROGRAMS
from tracer.cli import main

pytestmark = pytest.mark.gpu
KINDS = ("RAW", "WAR", "WAW", "reuse")


def traced(tmp_path: Path, capsys: pytest.CaptureFixture[str], program: str) -> tuple[int, dict]:
    run = tmp_path / "run"
    code = main(["trace", "run", "--memory", "--fail-on-hazard", "-o", str(run), "--json", "--", sys.executable,
                 str(PROGRAMS / f"{program}.py")])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.parametrize("program", sorted(OPS_EXPECTED))
def test_ops_program(program: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = traced(tmp_path, capsys, program)
    h = verdict["hazards"]
    assert h["memory"], h
    found = {k: h["counts"].get(k, 0) for k in KINDS if h["counts"].get(k, 0)}
    expected = OPS_EXPECTED[program]
    either = OPS_EITHER.get(program)
    if either:  # the kinds named by the order the GPU ran them in: counted together
        found = {either[0]: sum(found.pop(k, 0) for k in either), **found}
    assert set(found) == set(expected), (program, found, h["listed"][:4])
    assert all(found[k] >= n for k, n in expected.items()), (program, found)
    assert h["counts"]["may"] == OPS_MAY.get(program, 0), h["counts"]
    assert h["not_judged"] == [], h["not_judged"]
    assert (code != 0) is bool(expected), (code, h["counts"])


def test_graph_races_stay_inside_each_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The branch race of a graph replayed 3 times: found in each replay, never between two."""
    _, verdict = traced(tmp_path, capsys, "ops_graph_branches")
    listed = verdict["hazards"]["listed"]
    assert {h["producer"]["range"] for h in listed} == {"replay0", "replay1", "replay2"}, listed
    assert all(h["producer"]["range"] == h["consumer"]["range"] for h in listed), listed
    assert verdict["graph_launches"]["launches"] == 3 and verdict["graph_launches"]["stream_recorded"] == 3
