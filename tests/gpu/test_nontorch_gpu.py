"""On a GPU: a program that never imports torch (cuda.core kernels, its own buffers, nvtx ranges)
under `tracer trace run --memory`: the race is found from launch arguments and CUPTI's
allocation records alone, marked "may", and no kernel is left without memory unannounced."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tracer.cli import main

pytestmark = pytest.mark.gpu
PROGRAM = Path(__file__).parent / "programs" / "nontorch_no_wait.py"


def test_race_found_without_torch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("nvtx", reason="the program's NVTX ranges come from the nvtx package")
    run = tmp_path / "run"
    code = main(["trace", "run", "--memory", "-o", str(run), "--json", "--", sys.executable, str(PROGRAM)])
    out = capsys.readouterr().out
    stdout = (run / "logs" / "stdout.log").read_text() if (run / "logs").is_dir() else ""
    assert code == 0 and "nontorch_no_wait ok" in stdout, out[-2000:]
    hazards = json.loads(out)["hazards"]
    assert hazards["memory"] and hazards["kernels_with_memory"] >= 4, hazards
    assert hazards["counts"]["RAW"] >= 1 and hazards["counts"]["may"] >= 1, hazards["counts"]
    raw = [h for h in hazards["listed"] if h["kind"] == "RAW"]
    assert any("slow_fill" in h["producer"]["kernel"] and "scale2" in h["consumer"]["kernel"] for h in raw), raw[:2]
    unknown = hazards["launch_unknown"]
    assert all(u["kernel"] and u["reason"] for u in unknown), unknown
    assert not [u for u in unknown if u["kernel"] in ("slow_fill", "scale2")], unknown
