"""On a GPU (issue #32): a program that ends hard, hangs, is traced for a while only, uses a
DataLoader's workers, or starts an isolated interpreter keeps the kernels it ran before the end in
the verdict, and the verdict says what is missing. crash_ends.py runs 61 kernels in NVTX ranges
and synchronises the device before it ends (its whole GPU work takes about a second)."""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from memory_tables import PROGRAMS
from tracer.cli import main

pytestmark = pytest.mark.gpu
ENDS = str(PROGRAMS / "crash_ends.py")


def trace_run(tmp_path: Path, *argv: str, name: str = "run") -> tuple[int, Path, str]:
    run = tmp_path / name
    code = main(["trace", "run", "--backend", "cupti", "-o", str(run), "--json", *argv])
    return code, run, ""


def only_process(run: Path) -> dict:
    command = json.loads((run / "command.json").read_text())
    busy = [p for p in command["processes"] if p["kernels"]]
    assert len(busy) == 1, command["processes"]
    return busy[0]


@pytest.mark.parametrize("how, exit_code, outcome", [
    ("normal", 0, "complete"), ("exception", 7, "complete"), ("os_exit", 0, "complete"),
    ("segv", 7, "partial"), ("abort", 7, "partial"), ("sigkill", 7, "partial")])
def test_every_ending_keeps_the_kernels_that_ran_before_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           how: str, exit_code: int, outcome: str) -> None:
    code, run, _ = trace_run(tmp_path, "--timeout", "120", "--", sys.executable, ENDS, how)
    err = capsys.readouterr().err
    assert code == exit_code, err
    assert run.is_dir() and not run.with_name("run.failed").exists()
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["kernels"] == 61, (how, verdict["kernels"], err)
    p = only_process(run)
    assert p["outcome"] == outcome, p
    if how in ("segv", "abort"):
        signum = signal.SIGSEGV if how == "segv" else signal.SIGABRT
        assert p["fatal_signal"] == signum and p["flushed_at_signal"] is True and p["unflushed_s"] == 0.0
    if how == "sigkill":  # flushed at its device synchronisation; the bound says what may be missing
        assert p["state"] == "died" and p["unflushed_s"] is not None and p["unflushed_s"] < 2.0
    if how == "os_exit":
        assert (p["ended"], p["state"]) == ("os._exit", "exited")


def test_a_hang_stopped_at_the_timeout_is_analysed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, run, _ = trace_run(tmp_path, "--timeout", "25", "--", sys.executable, ENDS, "hang")
    err = capsys.readouterr().err
    assert code == 8, err  # the timeout's code, after writing
    assert run.is_dir() and not run.with_name("run.failed").exists()
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["stopped"] == "timeout" and verdict["kernels"] == 61
    (ending,) = verdict["ending"]
    assert ending["how"] == "stopped by SIGTERM" and ending["open_ranges"] == ["hung here"]
    assert any(s["kernels"] == 61 and s["last"] for s in ending["streams"]), ending


def test_stop_after_traces_a_window_and_leaves_the_program_running(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    begun = time.monotonic()
    code, run, _ = trace_run(tmp_path, "--stop-after", "12", "--timeout", "120", "--", sys.executable, ENDS, "loop")
    took = time.monotonic() - begun
    err = capsys.readouterr().err
    p = only_process(run)
    try:
        assert code == 0, err
        assert took < 40 and p["state"] == "detached" and p["outcome"] == "complete" and p["kernels"] > 61
        os.kill(p["pid"], 0)  # still running, untraced
        assert json.loads((run / "verdict.json").read_text())["stopped"] == "stop-after"
    finally:
        try:
            os.kill(p["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_dataloader_workers_end_well_and_the_main_process_keeps_its_kernels(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, run, _ = trace_run(tmp_path, "--timeout", "120", "--", sys.executable, str(PROGRAMS / "dataloader_workers.py"))
    err = capsys.readouterr().err
    assert code == 0, err
    command = json.loads((run / "command.json").read_text())
    main_proc = only_process(run)
    workers = [p for p in command["processes"] if p["ppid"] == main_proc["pid"]]
    assert len(workers) >= 2 and all(p["outcome"] in ("no CUDA", "complete") for p in workers), command["processes"]
    assert json.loads((run / "verdict.json").read_text())["kernels"] == main_proc["kernels"] > 0


def test_an_isolated_interpreter_is_an_untraced_gpu_process_in_the_verdict(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "both.sh"
    script.write_text(f"set -e\n{sys.executable} {ENDS} normal\n{sys.executable} -I {ENDS} normal\n")
    code, run, _ = trace_run(tmp_path, "--timeout", "120", "--fail-on-unordered", "--", "bash", str(script))
    err = capsys.readouterr().err
    assert code == 1, err  # a check was asked for and an untraced process held a GPU
    verdict = json.loads((run / "verdict.json").read_text())
    isolated = [u for u in verdict["untraced"] if "-I" in u["cmdline"]]
    assert len(isolated) == 1 and isolated[0]["gpu"] == "yes", verdict["untraced"]
    assert "HELD A GPU" in err and f"untraced process {isolated[0]['pid']}" in err
    assert verdict["kernels"] == 61  # the traced one


def test_a_hung_two_rank_gloo_job_names_where_each_rank_stood(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(PROGRAMS / "gloo_hang.py")]
    code, run, _ = trace_run(tmp_path, "--timeout", "45", "--", *job)
    err = capsys.readouterr().err
    assert code == 8, err
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["kind"] == "job" and verdict["stopped"] == "timeout"
    ends = {e["label"]: e for e in verdict["ending"]}
    assert {"rank 0", "rank 1"} <= set(ends), list(ends)
    assert ends["rank 0"]["open_ranges"][-1] == "allreduce step 3", ends["rank 0"]
    assert ends["rank 1"]["open_ranges"][-1] == "rank 1 skipped the all-reduce of step 3", ends["rank 1"]
    for label in ("rank 0", "rank 1"):
        assert any(s["last"] for s in ends[label]["streams"]), ends[label]
    assert "rank 0: stopped by signal 15" in err and "in NVTX range" in err
