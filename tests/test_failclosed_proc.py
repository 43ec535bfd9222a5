"""tracer.proc.run under hostile targets: a grandchild that ignores SIGTERM never outlives the run,
whether the run timed out or its direct child exited; bad timeouts are refused; a timeout is exit 8."""
from __future__ import annotations

import math
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests import fake_tools
from tracer import gpu, proc
from tracer.errors import TimedOut, UsageError

# The direct child starts a grandchild that ignores SIGTERM and sleeps, writes its pid, then either
# exits at once ("exit") or sleeps until it is killed ("hang").
SCRIPT = """
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)
    os._exit(0)
open(sys.argv[1], "w").write(str(pid))
if sys.argv[2] == "hang":
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Running or sleeping (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _run(tmp_path: Path, mode: str, timeout: float) -> tuple[proc.ProcResult, int]:
    pidfile = tmp_path / "grandchild.pid"
    res = proc.run([sys.executable, "-c", SCRIPT, str(pidfile), mode], timeout=timeout,
                   stdout_path=tmp_path / "out", stderr_path=tmp_path / "err")
    return res, int(pidfile.read_text())


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "GRACE_S", 0.5, raising=False)


def test_timeout_kills_a_grandchild_that_ignores_sigterm(tmp_path: Path) -> None:
    res, grandchild = _run(tmp_path, "hang", timeout=2)
    assert res.timed_out and res.returncode is None
    time.sleep(0.2)
    assert not _alive(grandchild)


def test_a_grandchild_left_behind_by_an_exited_child_is_killed(tmp_path: Path) -> None:
    res, grandchild = _run(tmp_path, "exit", timeout=60)
    assert res.returncode == 0 and not res.timed_out
    time.sleep(0.2)
    assert not _alive(grandchild)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, 0.0, "soon"])
def test_bad_timeouts_are_refused(tmp_path: Path, bad: object) -> None:
    with pytest.raises(UsageError, match=r"--timeout .* must be a number of seconds above 0"):
        proc.run(["true"], timeout=bad, stdout_path=tmp_path / "o", stderr_path=tmp_path / "e")  # type: ignore[arg-type]  # deliberately a bad value: the point of the test


def test_timed_out_result_raises_timedout(tmp_path: Path) -> None:
    res = proc.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1,
                   stdout_path=tmp_path / "o", stderr_path=tmp_path / "e")
    with pytest.raises(TimedOut, match="killed at its --timeout of 1 s") as info:
        proc.raise_if_timed_out(res, "the capture")
    assert info.value.exit_code == 8
    proc.raise_if_timed_out(proc.run(["true"], timeout=5, stdout_path=tmp_path / "o", stderr_path=tmp_path / "e"), "x")


@pytest.mark.parametrize("argv", [["trace", "run", "--timeout", "nan", "--", "python", "x.py"],
                                  ["trace", "run", "--timeout", "-5", "--", "python", "x.py"],
                                  ["sanitize", "--timeout", "0", "--", "python", "x.py"],
                                  ["sanitize", "--timeout", "inf", "--", "python", "x.py"]])
def test_cli_timeouts_are_one_line_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    from tracer.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv + ["-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and err.count("\n") == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing staged, nothing left


def test_trace_run_timeout_exits_8_and_keeps_the_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture killed at its timeout: exit 8, one line, the staged run kept as *.failed (the
    CUPTI path with the fake backend: the bootstrap, markers and process tree are real)."""
    from tracer.capture import launcher
    from tracer.capture.options import CaptureOptions
    from tracer.cli import main

    real = launcher.capture_run
    monkeypatch.setattr(launcher, "capture_run", lambda *a, **k: real(*a, options=CaptureOptions(backend="fake"),
                                                                      describe=False))
    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    prog = tmp_path / "x.py"
    prog.write_text("import time; time.sleep(60)\n")
    code = main(["trace", "run", "--backend", "cupti", "--timeout", "1", "-o", str(tmp_path / "run"), "--",
                 "python", str(prog)])
    err = capsys.readouterr().err
    assert code == 8, err
    assert "timeout" in err and "Traceback" not in err and err.count("\n") == 1
    kept = tmp_path / "run.failed"
    assert (kept / "logs" / "stderr.log").is_file() and (kept / "command.json").is_file()
    assert str(kept / "logs") in err and not (tmp_path / "run").exists()
    assert sorted(os.listdir(tmp_path)) == ["run.failed", "x.py"]


def test_ctrl_c_ends_the_group_and_is_raised_unless_the_caller_takes_it(tmp_path: Path) -> None:
    """Ctrl-C while a command runs: its whole group ends either way; `trace run` (interruptible)
    gets a result to analyse, every other caller the KeyboardInterrupt, as before."""
    import threading

    proc_mod = proc
    for interruptible in (False, True):
        pidfile = tmp_path / f"pid-{interruptible}"
        argv = ["bash", "-c", f"sleep 60 & echo $! > {pidfile}; wait"]
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        if interruptible:
            res = proc_mod.run(argv, timeout=30, stdout_path=tmp_path / "o", stderr_path=tmp_path / "e", interruptible=True)
            assert res.interrupted and res.stopped == "interrupt" and res.returncode is None and not res.timed_out
        else:
            with pytest.raises(KeyboardInterrupt):
                proc_mod.run(argv, timeout=30, stdout_path=tmp_path / "o", stderr_path=tmp_path / "e")
        child = int(pidfile.read_text())
        assert not Path(f"/proc/{child}").exists() or (Path(f"/proc/{child}/stat").read_text().split(") ")[1][0] == "Z")
