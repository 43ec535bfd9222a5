"""On a GPU: `tracer trace run` with the CUPTI backend gives the ordering verdicts the workloads
are built to have."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_schemas import assert_valid
from tracer.cli import main

pytestmark = pytest.mark.gpu


def trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    out = tmp_path / "run"
    code = main(["trace", "run", *argv, "--backend", "cupti", "-o", str(out), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (out / "trace.sqlite").is_file() and (out / "verdict.json").is_file() and (out / "environment.json").is_file()
    for name, kind in (("command.json", "command"), ("environment.json", "environment"), ("verdict.json", "verdict")):
        assert_valid(kind, json.loads((out / name).read_text()))  # the JSON contracts, on a CUPTI run
    assert json.loads((out / "environment.json").read_text())["gpu"]["sms"] > 0
    return data


def test_cast_transpose_dgrad_is_same_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = trace(tmp_path, capsys, "cast_transpose_dgrad", "--shape", "1024x1024x1024", "--steps", "3")
    assert d["pair_counts"]["same-stream"] == 3 and d["pair_counts"]["unordered"] == 0
    assert all("nvjet" in p["consumer_kernel"] and p["producer_kernel"] == "cast_transpose" for p in d["pairs"])
    assert d["unattributed"] < d["kernels"]


def test_event_ordered_dgrad_has_the_edge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = trace(tmp_path, capsys, "event_ordered_dgrad", "--shape", "1024x1024x1024", "--steps", "3")
    assert d["pair_counts"]["event-ordered"] == 3
    for p in d["pairs"]:
        assert p["producer_stream"] != p["consumer_stream"]
        assert p["edge"]["kind"] == "event" and p["edge"]["record_stream"] == p["producer_stream"]
        assert p["edge"]["wait_stream"] == p["consumer_stream"]


def test_planted_cross_stream_is_unordered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = trace(tmp_path, capsys, "planted_cross_stream", "--shape", "1024x1024x1024", "--steps", "3")
    assert d["pair_counts"]["unordered"] == 3


def test_fail_on_unordered_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["trace", "run", "planted_cross_stream", "--shape", "512x512x512", "--steps", "2", "--backend", "cupti",
                 "-o", str(tmp_path / "r"), "--fail-on-unordered"])
    assert code == 1


def test_user_command_after_dashdash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys, torch\nx = torch.ones(1024, device='cuda')\ny = x * 2\ntorch.cuda.synchronize()\n"
                      "print('argv', sys.argv[1:])\nsys.exit(3)\n")
    code = main(["trace", "run", "--backend", "cupti", "-o", str(tmp_path / "u"), "--json", "--", "python", str(script), "--steps", "3"])
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # a failed target fails the command, after its trace was analysed
    assert code == 7 and data["kernels"] >= 2 and "the traced command exited 3" in captured.err
    command = json.loads((tmp_path / "u" / "command.json").read_text())
    assert command["exit"] == 3
    assert "argv ['--steps', '3']" in (tmp_path / "u" / "logs" / "stdout.log").read_text()


def test_nsys_backend_says_when_it_cannot_write_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.capture.nsys import find_writer
    from tracer.errors import ToolMissingError

    try:
        find_writer(prepare=True)  # as the capture asks: libraries prepared from drgn when only they lack
    except ToolMissingError:
        pass
    else:
        pytest.skip("this machine's nsys can write reports (or be prepared to, from drgn)")
    code = main(["trace", "run", "cast_transpose_dgrad", "--backend", "nsys", "-o", str(tmp_path / "n")])
    err = capsys.readouterr().err
    assert code == 5 and "--backend cupti" in err
