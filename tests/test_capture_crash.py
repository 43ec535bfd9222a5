"""Issue #32 on CPU with the fake backend: a program that ends hard (os._exit, a fatal signal,
SIGKILL), hangs (--timeout, stopped and analysed), is traced for a while only (--stop-after) or
starts processes tracer cannot trace keeps what it did, and the verdict says what is missing."""
from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.test_capture_session import FAKE, run_fake
from tracer.capture import launcher
from tracer.format.marker import Marker, State
from tracer.capture.nsys_schema import TraceWriter
from tracer.capture.records import KernelRec, MarkerRec, TraceRecords
from tracer.errors import TraceFormatError
from tracer.analysis.ending import open_ranges, process_end, stream_ends
from tracer.readers.load import load_trace

KERNELS_THEN = textwrap.dedent("""
    import ctypes, os, signal, sys, time
    from tracer.capture.session import current
    s = current()
    for i in range(4):
        s.backend.fake_kernel(f"kernel_{i}", stream=7 + i % 2)
    how = sys.argv[1]
    if how == "os_exit":
        os._exit(3)
    if how == "segv":
        ctypes.string_at(0)  # a real fault in C: Python's own handlers cannot run here
    if how == "abort":
        os.abort()
    if how == "sigkill":
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "hang":
        print("hanging", flush=True)
        time.sleep(600)
""")


def kernel_names(path: Path) -> set[str]:
    with sqlite3.connect(path) as con:
        return {r[0] for r in con.execute(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName")}


def test_os_exit_writes_the_whole_trace_first(tmp_path: Path) -> None:
    res, run = run_fake(tmp_path, KERNELS_THEN, "os_exit", flush_s=30)  # no flush would have saved it
    assert res.proc.returncode == 3
    (m,) = res.processes
    assert (m.state, m.ended, m.exit, m.outcome, m.kernels) == ("exited", "os._exit", 3, "complete", 4)
    assert kernel_names(run / "trace.sqlite") == {f"kernel_{i}" for i in range(4)}
    assert launcher.describe(m).split()[2:4] == ["left", "by"]


@pytest.mark.parametrize("how, signum", [("segv", signal.SIGSEGV), ("abort", signal.SIGABRT)])
def test_a_fatal_signal_flushes_before_the_process_dies_of_it(tmp_path: Path, how: str, signum: int) -> None:
    res, run = run_fake(tmp_path, KERNELS_THEN, how, flush_s=30)
    assert res.proc.returncode == -signum  # it still dies of its signal, as without tracer
    (m,) = res.processes
    assert (m.state, m.fatal_signal, m.flushed_at_signal, m.outcome, m.kernels) == \
        ("died", signum, True, "partial", 4)
    assert m.unflushed_s == 0.0 and f"died of {signal.Signals(signum).name} (flushed at it)" in launcher.describe(m)
    assert kernel_names(run / "trace.sqlite") == {f"kernel_{i}" for i in range(4)}
    marker = json.loads((run / "procs" / f"{m.file}.json").read_text())
    assert sorted(marker["fatal_signals"]) == sorted(int(s) for s in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE,
                                                                        signal.SIGILL, signal.SIGABRT))


def test_a_programs_own_fatal_signal_handler_is_left_alone(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import signal
        signal.signal(signal.SIGABRT, lambda *a: None)
        from tracer.capture.session import current
        current().activate("first CUDA use")  # lazy: CUPTI (and the handlers) start at the first CUDA use
        from tracer.capture import fatal
        print(*sorted(fatal.installed()))
    """)
    res, run = run_fake(tmp_path, script, flush_s=30, lazy=True)
    assert res.proc.returncode == 0, (run / "logs" / "stderr.log").read_text()
    installed = [int(x) for x in (run / "logs" / "stdout.log").read_text().split()]
    assert int(signal.SIGABRT) not in installed and int(signal.SIGSEGV) in installed


def test_a_sigkill_says_how_long_it_ran_unflushed(tmp_path: Path) -> None:
    res, run = run_fake(tmp_path, KERNELS_THEN, "sigkill", flush_s=0.1)
    (m,) = res.processes
    assert (m.state, m.outcome, m.kernels) == ("died", "partial", 4)
    assert m.unflushed_s is not None and 0 <= m.unflushed_s <= 0.1 + launcher.SAMPLE_S + 0.5
    assert f"up to {m.unflushed_s:g} s unflushed" in launcher.describe(m)


def test_unflushed_time_is_bounded_by_the_last_sample_that_saw_it_alive() -> None:
    m = Marker(file="h-5", pid=5, host="h", state=State.RUNNING, cupti_started_by="start", last_flush_unix_ns=10_000_000_000,
               clock_start=(0, 1))
    seen = {5: {"last_seen_unix_ns": 12_000_000_000}}
    assert launcher.unflushed_s(m, seen, 99_000_000_000) == 2.0 + launcher.SAMPLE_S
    assert launcher.unflushed_s(m, {}, 15_000_000_000) == 5.0  # never sampled: up to now
    assert launcher.unflushed_s(m.with_(flushed_at_signal=True), seen, 0) == 0.0
    assert launcher.unflushed_s(m.with_(cupti_started_by=None, last_flush_unix_ns=None), seen, 0) is None  # CUPTI never started


def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, script: str, *options: str) -> tuple[list[str], Path]:
    """`trace run` on the fake backend, passing --stop-after through."""
    from tests import fake_tools
    from tracer import gpu

    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    real = launcher.capture_run
    monkeypatch.setattr(launcher, "capture_run", lambda *a, **k: real(
        *a, options=replace(FAKE, flush_s=0.1), describe=k.get("describe", False), stop_after=k.get("stop_after")))
    prog = tmp_path / "prog.py"
    prog.write_text(script)
    return ["trace", "run", "--backend", "cupti", "-o", str(tmp_path / "run"), *options, "--", sys.executable,
            str(prog)], tmp_path / "run"


HANG = textwrap.dedent("""
    import sys, time
    from tracer.capture.session import current
    s = current()
    b = s.backend
    b.fake_kernel("step_0", stream=7)
    b.fake_kernel("step_1", stream=7)
    b.fake_kernel("allreduce", stream=9, running=True)  # a collective waiting for a dead rank
    b.rec.markers.append((2, b.clock(), 1, 0, "train step 2", ""))  # NVTX push, never popped
    print("hanging", flush=True)
    time.sleep(int(sys.argv[1]) if len(sys.argv) > 1 else 600)
    b.fake_kernel("after_the_window", stream=7)
""")


def test_a_hang_stopped_at_the_timeout_is_analysed_and_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    argv, run = cli(monkeypatch, tmp_path, HANG, "--timeout", "4")
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 8, err  # the timeout's code, after the run directory was written
    assert run.is_dir() and not run.with_name("run.failed").exists() and "analysed as a partial run" in err
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["stopped"] == "timeout" and verdict["kernels"] == 2
    (ending,) = verdict["ending"]
    assert ending["how"] == "stopped by SIGTERM" and ending["open_ranges"] == ["train step 2"]
    streams = {s["stream"]: s for s in ending["streams"]}
    assert streams[7]["last"] == ["step_0", "step_1"] and streams[7]["unfinished"] == []
    assert streams[9]["kernels"] == 0 and streams[9]["unfinished"] == ["allreduce"]
    assert "stopped at --timeout" in err and "NEVER FINISHED: allreduce" in err and "in NVTX range: train step 2" in err
    assert json.loads((run / "command.json").read_text())["stopped"] == "timeout"


def test_stop_after_finishes_the_traces_and_leaves_the_program_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    argv, run = cli(monkeypatch, tmp_path, HANG, "--stop-after", "1.5", "--timeout", "60")
    argv.append("8")  # the program sleeps 8 s, then launches one more kernel
    begun = time.monotonic()
    code = main(argv)
    took = time.monotonic() - begun
    out, err = capsys.readouterr()
    assert code == 0, err
    assert took < 6, took  # it did not wait for the program
    command = json.loads((run / "command.json").read_text())
    (proc,) = command["processes"]
    try:
        assert command["stopped"] == "stop-after" and command["exit"] is None
        assert proc["state"] == "detached" and proc["outcome"] == "complete" and proc["kernels"] == 2
        os.kill(proc["pid"], 0)  # still running
        verdict = json.loads((run / "verdict.json").read_text())
        assert verdict["stopped"] == "stop-after" and verdict["ending"][0]["how"] == "traced until --stop-after, left running"
        assert "traces finished at --stop-after" in err
    finally:
        os.kill(proc["pid"], signal.SIGKILL)


def test_stop_after_must_fall_before_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    argv, run = cli(monkeypatch, tmp_path, HANG, "--stop-after", "90", "--timeout", "60")
    assert main(argv) == 2
    assert "--stop-after 90.0 must be a number of seconds above 0 and below --timeout (60)" in capsys.readouterr().err
    assert not run.exists()


SHELL_CHILDREN = textwrap.dedent("""
    import subprocess, sys
    from tracer.capture.session import current
    current().backend.fake_kernel("traced")
    subprocess.run([sys.executable, "-I", "-c", "import time; time.sleep(1.0)"], check=True)
""")


def test_untraced_processes_are_in_the_verdict_and_fail_the_checks_when_gpu_use_is_possible(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    argv, run = cli(monkeypatch, tmp_path, SHELL_CHILDREN)
    assert main(argv) == 0  # no check asked for: the run stands
    err = capsys.readouterr().err
    verdict = json.loads((run / "verdict.json").read_text())
    (child,) = [u for u in verdict["untraced"] if "-I" in u["cmdline"]]
    assert child["gpu"] == "not seen" and f"untraced pid {child['pid']}" in err and "not seen holding a GPU" in err
    # the same child seen holding a device file (here /dev/null stands in for /dev/nvidia0)
    monkeypatch.setattr(launcher, "DEVICE_FILE", re.compile(r"^/dev/null$"))
    (tmp_path / "b").mkdir()
    argv, run = cli(monkeypatch, tmp_path / "b", SHELL_CHILDREN, "--fail-on-unordered")
    assert main(argv) == 1
    err = capsys.readouterr().err
    verdict = json.loads((run / "verdict.json").read_text())
    (child,) = [u for u in verdict["untraced"] if "-I" in u["cmdline"]]
    assert child["gpu"] == "yes" and "HELD A GPU" in err
    assert f"untraced process {child['pid']} (python" in err and "held a GPU: its GPU work is not judged" in err


def test_gpu_use_of_a_process_that_is_gone_stays_what_was_known() -> None:
    assert launcher.gpu_use(2**22 + 12345, "yes") is launcher.GpuUse.YES
    assert launcher.gpu_use(os.getpid(), "unknown") in (launcher.GpuUse.YES, launcher.GpuUse.NOT_SEEN)


def written_trace(tmp_path: Path, kernels: list[KernelRec], markers: list[tuple]) -> Path:
    w = TraceWriter(tmp_path / "t.sqlite", 42, "fake")
    rec = TraceRecords(pid=42, memory=False)
    rec.kernels.extend(kernels)
    rec.markers.extend(markers)
    return w.close(rec)


def k(name: str, stream: int, start: int, end: int) -> KernelRec:
    return KernelRec(start, end, 0, 1, stream, start, name, 1, 1, 1, 32, 1, 1, 16, 0, 0, 0, 0)


def test_stream_ends_name_the_last_kernels_and_those_that_never_finished(tmp_path: Path) -> None:
    path = written_trace(tmp_path, [k("a", 7, 100, 200), k("b", 7, 300, 400), k("c", 7, 500, 600), k("d", 7, 700, 800),
                                    k("spin", 7, 900, 0), k("queued", 8, 0, 0)],
                         [MarkerRec(2, 50, 1, 0, "outer", ""), MarkerRec(2, 60, 2, 0, "inner", ""),
                          MarkerRec(2, 70, 3, 0, "closed", ""), MarkerRec(4, 80, 3, 0, "", "")])
    trace = load_trace(path)
    ends = {s.stream: s for s in stream_ends(trace)}
    assert ends[7].last == ("b", "c", "d") and ends[7].kernels == 4 and ends[7].unfinished == ("spin",)
    assert ends[7].last_end_ns == 800 and ends[8].unfinished == ("queued (queued)",) and ends[8].last == ()
    assert open_ranges(trace) == ("outer", "inner")
    end = process_end("rank 1", "stopped by SIGTERM", trace)
    assert end.lines()[1] == "    in NVTX ranges: outer > inner" and "NEVER FINISHED: spin" in end.lines()[2]


def test_a_corrupt_unfinished_list_is_an_error_not_an_empty_answer(tmp_path: Path) -> None:
    path = written_trace(tmp_path, [k("a", 7, 100, 200)], [])
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO META_DATA_EXPORT VALUES ('TRACER_UNFINISHED', '{not json')")
    with pytest.raises(TraceFormatError, match="TRACER_UNFINISHED is not JSON"):
        stream_ends(load_trace(path))


def test_ctrl_c_stops_the_group_and_the_run_is_analysed_as_at_a_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import threading

    from tracer.cli import main

    argv, run = cli(monkeypatch, tmp_path, HANG, "--timeout", "120")
    markers = tmp_path / "run"

    def interrupt_once_hanging() -> None:  # Ctrl-C reaches tracer (the command runs in its own session)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any("hanging" in p.read_text() for p in markers.parent.glob(".run.partial-*/logs/stdout.log")):
                break
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_hanging, daemon=True).start()
    begun = time.monotonic()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 8 and time.monotonic() - begun < 60, err
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["stopped"] == "interrupt" and verdict["kernels"] == 2
    assert verdict["ending"][0]["open_ranges"] == ["train step 2"] and "stopped at Ctrl-C" in err


def test_a_fault_in_a_thread_that_released_the_gil_is_flushed_too(tmp_path: Path) -> None:
    """The fault hits a worker thread inside a C call made without the GIL (ctypes' CDLL releases
    it) while the main thread runs Python: the handler takes the GIL back, flushes, and the process
    still dies of SIGSEGV."""
    script = textwrap.dedent("""
        import ctypes, threading, time
        from tracer.capture.session import current
        s = current()
        for i in range(3):
            s.backend.fake_kernel(f"kernel_{i}")
        libc = ctypes.CDLL(None)
        libc.strlen.argtypes = [ctypes.c_void_p]
        threading.Thread(target=lambda: (time.sleep(0.2), libc.strlen(None))).start()
        n = 0
        while True:  # the main thread keeps the interpreter busy
            n += 1
    """)
    res, run = run_fake(tmp_path, script, flush_s=30, timeout=60)
    assert res.proc.returncode == -signal.SIGSEGV, (run / "logs" / "stderr.log").read_text()
    (m,) = res.processes
    assert (m.fatal_signal, m.flushed_at_signal, m.kernels) == (signal.SIGSEGV, True, 3)


def test_a_flush_that_cannot_finish_still_ends_the_process(tmp_path: Path) -> None:
    """The fault hits while the trace's lock is held (here by the faulting thread itself): the
    handler gives up on the flush after its wait and the process dies of SIGSEGV; a handler that
    hangs outright is ended by the watchdog's SIGALRM."""
    held = textwrap.dedent("""
        import ctypes
        from tracer.capture.session import current
        s = current()
        s.backend.fake_kernel("kernel_0")
        s.write_lock.acquire()
        ctypes.string_at(0)
    """)
    (tmp_path / "held").mkdir()
    res, run = run_fake(tmp_path / "held", held, flush_s=30, timeout=60)
    assert res.proc.returncode == -signal.SIGSEGV
    (m,) = res.processes
    assert m.fatal_signal == signal.SIGSEGV and not m.flushed_at_signal and m.kernels == 0
    assert "died of SIGSEGV" in launcher.describe(m) and "flushed at it" not in launcher.describe(m)
    hangs = textwrap.dedent("""
        import ctypes, time
        from tracer.capture import fatal
        fatal.uninstall()
        fatal.install(lambda signum: time.sleep(120))
        ctypes.string_at(0)
    """)
    (tmp_path / "hangs").mkdir()
    begun = time.monotonic()
    res, run = run_fake(tmp_path / "hangs", hangs, flush_s=30, timeout=90)
    assert res.proc.returncode == -signal.SIGALRM and time.monotonic() - begun < 60
