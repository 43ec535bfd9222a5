"""Capture sessions per process (issue #16), on CPU with the fake backend: the same bootstrap,
files and markers as the CUPTI backend, without CUPTI."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tracer.capture.launcher import (BOOT, capture_env, capture_run, describe, pick_trace, read_markers, resolve_command,
                                     with_gpu)
from tracer.capture.options import ENV_DIR, CaptureOptions
from tracer.capture.session import file_stem
from tracer.errors import UsageError
from tracer.format.marker import Marker, State
from tracer.format.procs import Outcome

FAMILY = textwrap.dedent("""
    import multiprocessing as mp, os, signal, subprocess, sys, time

    def leaf(tag):
        print("leaf", tag, os.getpid(), os.getppid(), flush=True)

    def middle(method):
        p = mp.get_context(method).Process(target=leaf, args=(method + "-grandchild",))
        p.start(); p.join()

    def sleeper():
        time.sleep(120)

    if __name__ == "__main__":
        for method in ("spawn", "fork"):
            p = mp.get_context(method).Process(target=middle, args=(method,))
            p.start(); p.join()
            assert p.exitcode == 0, p.exitcode
        k = mp.get_context("spawn").Process(target=sleeper)
        k.start()
        deadline = time.time() + 60
        marker = [f for f in os.listdir(os.environ["TRACER_CAPTURE_DIR"]) if f.split("-")[-1] == f"{k.pid}.json"]
        while not marker and time.time() < deadline:
            time.sleep(0.1)
            marker = [f for f in os.listdir(os.environ["TRACER_CAPTURE_DIR"]) if f.split("-")[-1] == f"{k.pid}.json"]
        os.kill(k.pid, signal.SIGKILL); k.join()
        subprocess.run(["sleep", "1"])
        print("killed", k.pid, flush=True)
""")


FAKE = CaptureOptions(backend="fake", lazy=False)  # the fake backend, started with each process


def run_fake(tmp_path: Path, script: str, *args: str, memory: bool = False, timeout: float = 120,
             **options: object):
    prog = tmp_path / "prog.py"
    prog.write_text(script)
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    opts = replace(FAKE, memory=memory, devices=("cpu",), **options)  # type: ignore[arg-type]  # options are the test's keyword overrides of CaptureOptions
    res = capture_run([sys.executable, str(prog), *args], run, run / "logs", timeout, options=opts, describe=True)
    return res, run


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory):
    return run_fake(tmp_path_factory.mktemp("family"), FAMILY)


def test_every_process_of_nested_spawn_and_fork_children_writes_its_own_files(family) -> None:
    res, run = family
    assert res.proc.returncode == 0, (run / "logs" / "stderr.log").read_text()
    out = (run / "logs" / "stdout.log").read_text()
    markers = {m.pid: m for m in read_markers(run / "procs")}
    root = next(m for m in markers.values() if m.ppid == os.getpid())
    leaves = {line.split()[1]: (int(line.split()[2]), int(line.split()[3])) for line in out.splitlines() if line.startswith("leaf")}
    assert set(leaves) == {"spawn-grandchild", "fork-grandchild"}
    for tag, (pid, ppid) in leaves.items():
        m = markers[pid]
        assert m.file == file_stem(m.host, pid, None) and m.ppid == ppid
        assert markers[ppid].ppid == root.pid  # a child of a child of the traced command
        assert m.state == "exited" and (run / "procs" / f"{m.file}.sqlite").is_file()
        assert m.fork_child is (tag == "fork-grandchild")
    fork_leaf = markers[leaves["fork-grandchild"][0]]
    assert fork_leaf.ended == "finalizer" and fork_leaf.fork_parent == fork_leaf.ppid
    assert all(m.backend == "fake" for m in markers.values())


def test_a_killed_child_is_settled_as_died_with_what_it_flushed(family) -> None:
    res, run = family
    killed = int(next(line for line in (run / "logs" / "stdout.log").read_text().splitlines() if line.startswith("killed")).split()[1])
    m = next(m for m in read_markers(run / "procs") if m.pid == killed)
    assert m.state == "died" and not m.kernels  # its marker rewritten by trace run
    listed = {p["pid"]: p for p in res.command_fields()["processes"]}
    assert listed[killed]["state"] == "died"
    if listed[killed]["outcome"] == "partial":  # killed after its trace file was begun: completed and marked
        with sqlite3.connect(run / "procs" / f"{m.file}.sqlite") as con:
            assert "died before exiting" in dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))["TRACER_PARTIAL"]
    else:
        assert listed[killed]["outcome"] == "no trace" and not (run / "procs" / f"{m.file}.sqlite").exists()
    assert not list((run / "procs").glob("*.partial.sqlite*"))


def test_non_python_children_are_listed_as_untraced(family) -> None:
    res, _ = family
    fields = res.command_fields()
    assert any(u["comm"] == "sleep" and u["cmdline"] == ["sleep", "1"] for u in fields["untraced"])
    traced = {p["pid"] for p in fields["processes"]}
    assert not traced & {u["pid"] for u in fields["untraced"]}
    assert "sampled every" in fields["untraced_note"]
    assert res.environment["python"] and "tracer" in res.environment  # versions, read while the command ran
    assert res.environment["gpu"] is None and "no traced process reported a GPU" in res.environment["gpu_note"]
    assert set(fields["tracer_s"]) == {"before_command", "after_command"}


def test_the_environment_costs_no_torch_import_and_takes_the_gpu_from_the_markers(tmp_path: Path) -> None:
    """trace run neither imports torch nor creates a CUDA context of its own (that took seconds and
    GPU memory beside the traced command): its GPU is what the traced processes held."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from tracer.capture.launcher import capture_run
        from tracer.capture.options import CaptureOptions
        run = Path({str(tmp_path / "run")!r})
        (run / "logs").mkdir(parents=True)
        res = capture_run([sys.executable, "-c", "pass"], run, run / "logs", 60, options=CaptureOptions(backend="fake"),
                          describe=True)
        print("torch" in sys.modules, sorted(res.environment)[:3])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("False ['cuda-core', 'cuda-python', 'cupti-python']"), out.stderr
    h200 = {"ordinal": 0, "name": "NVIDIA H200", "sm": "90", "sms": 132, "memory_gb": 139.8, "cuda": "13.0"}
    markers = [Marker(file=f"h-{pid}", pid=pid, host="h", state=State.EXITED, rank=rank, devices=tuple(devices))
               for pid, rank, devices in ((9, None, []), (8, 1, [{**h200, "ordinal": 1}]), (7, 0, [h200]))]
    env = with_gpu({"python": "3.12"}, markers)
    assert env["gpu"] == h200 and env["gpus"] == [h200, {**h200, "ordinal": 1}] and env["python"] == "3.12"


def test_processes_without_kernels_never_stand_for_the_run(family) -> None:
    res, run = family
    assert res.trace is None and not res.job and not (run / "trace.sqlite").exists()  # no empty analysis
    root = next(m for m in res.processes if m.ppid == os.getpid())
    con = sqlite3.connect(run / "procs" / f"{root.file}.sqlite")
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert meta["TRACER_PRODUCER"] == "fake" and meta["TRACER_PROCESS"] == root.file and "TRACER_PARTIAL" not in meta
    assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (0,)
    assert root.outcome == "complete" and "died" in res.failure()  # the sleeper SIGKILLed on purpose


def test_fork_child_does_not_repeat_its_parents_records(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import os, torch
        a = torch.ones(64) * 3          # the parent's op, before the fork
        pid = os.fork()
        if pid == 0:
            b = torch.ones(32) + 1      # the child's own op
            raise SystemExit(0)
        os.waitpid(pid, 0)
        c = a - 1
    """)
    res, run = run_fake(tmp_path, script, memory=True)
    assert res.proc.returncode == 0, (run / "logs" / "stderr.log").read_text()
    procs = run / "procs"
    markers = read_markers(procs)
    child = next(m for m in markers if m.fork_child)
    with sqlite3.connect(procs / f"{child.file}.sqlite") as con:
        names = [r[0] for r in con.execute("SELECT s.value FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId")]
    assert "aten::add.Tensor" in names and "aten::mul.Tensor" not in names and "aten::sub.Tensor" not in names
    parent_file = next(m.file for m in markers if not m.fork_child)
    with sqlite3.connect(procs / f"{parent_file}.sqlite") as con:
        parent = [r[0] for r in con.execute("SELECT s.value FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId")]
    assert "aten::mul.Tensor" in parent and "aten::sub.Tensor" in parent and "aten::add.Tensor" not in parent


def test_sigterm_writes_the_trace_before_dying(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    env = capture_env(procs, FAKE)
    child = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"], env=env,
                             stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"up"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) in (-signal.SIGTERM, 128 + signal.SIGTERM)  # it still dies of the signal
    m = read_markers(procs)[0]
    assert m.state == "exited" and m.ended == "sigterm" and m.exit == 128 + signal.SIGTERM
    assert (procs / f"{m.file}.sqlite").is_file()


def test_sigterm_reaches_a_process_whose_main_thread_is_stuck(tmp_path: Path) -> None:
    """A rank blocked in a collective for a dead peer never runs Python signal handlers: the
    watcher thread writes its trace (here the main thread blocks SIGTERM and sleeps)."""
    procs = tmp_path / "procs"
    code = ("import signal, threading, time\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])\n"
            "threading.Timer(0.3, print, ('up',), {'flush': True}).start()  # once the main thread sleeps\n"
            "time.sleep(120)\n")
    child = subprocess.Popen([sys.executable, "-c", code], env=capture_env(procs, FAKE),
                             stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"up"
    t0 = time.monotonic()
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=60) == 128 + signal.SIGTERM and time.monotonic() - t0 < 60
    m = read_markers(procs)[0]
    assert m.ended == "sigterm" and (procs / f"{m.file}.sqlite").is_file()


STUCK_IN_A_COLLECTIVE = textwrap.dedent("""
    import signal, threading, time
    from tracer.capture.records import SyncRec
    from tracer.capture.session import current
    s = current()
    for i in range(3):
        s.backend.fake_kernel(f"step_{i}")
    s.backend.fake_kernel("ncclAllReduce", running=True)  # waits for a dead peer: no end time at the forced flush
    s.backend.rec.syncs.append(SyncRec(s.backend.clock(), 2**64 - 1, 1, 7, 99, 3, 0, 0))  # a value SQLite cannot store
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # the main thread is stuck in C
    threading.Timer(0.3, print, ("up",), {"flush": True}).start()  # once it sleeps
    time.sleep(120)
""")


def test_a_rank_stopped_by_sigterm_in_a_collective_writes_its_trace(tmp_path: Path) -> None:
    """torchrun SIGTERMs the surviving rank of a job whose other rank died: its kernel in the
    collective never finished. Before, that record made the exit write fail and the rank left no
    trace, its marker still `running` (settled as `died`)."""
    procs = tmp_path / "procs"
    child = subprocess.Popen([sys.executable, "-c", STUCK_IN_A_COLLECTIVE], env=capture_env(procs, FAKE),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"up"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=60) == 128 + signal.SIGTERM
    (m,) = read_markers(procs)
    assert (m.state, m.ended, m.exit, m.kernels) == ("exited", "sigterm", 128 + signal.SIGTERM, 3)
    assert m.trace_error is None and m.cupti_started_by == "start", child.stderr.read() if child.stderr else ""
    with sqlite3.connect(procs / f"{m.file}.sqlite") as con:
        meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert "ncclAllReduce" in meta["TRACER_LEFT_OUT_CUPTI_ACTIVITY_KIND_KERNEL"] and "TRACER_PARTIAL" not in meta
    assert meta["TRACER_LEFT_OUT_CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"].startswith("1 records left out")


def test_a_trace_not_completed_at_exit_keeps_its_marker_and_flushed_batches(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import time
        from tracer.capture.session import current
        s = current()
        for i in range(4):
            s.backend.fake_kernel(f"k{i}")
        time.sleep(0.5)  # flushed
        def broken(*args, **kwargs):
            raise OSError("No space left on device")
        s.writer.close = broken
    """)
    res, run = run_fake(tmp_path, script, flush_s=0.1)
    (m,) = res.processes
    assert (m.state, m.outcome, m.kernels) == ("exited", "partial", 4)
    marker = json.loads((run / "procs" / f"{m.file}.json").read_text())
    assert marker["trace_error"] == "OSError: No space left on device" and marker["timing"]["phases_s"]["exit_total"] >= 0
    assert "did not finish writing its trace at exit" in marker["partial"] and res.trace == run / "trace.sqlite"


def test_a_programs_own_sigterm_handler_is_left_alone(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: (print('mine', flush=True), sys.exit(5)))\n"
            "print('up', flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], env=capture_env(procs, FAKE),
                             stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"up"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 5 and child.stdout.read().strip() == b"mine"
    assert read_markers(procs)[0].ended == "atexit"  # its handler exited normally: the trace was written at exit


def test_rank_from_the_environment_names_the_files(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    env = capture_env(procs, FAKE) | {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, timeout=60)
    m = read_markers(procs)[0]
    assert m.file.endswith(f"-{m.pid}-r3") and (m.rank, m.local_rank, m.world_size) == (3, 1, 4)


def test_bootstrap_does_nothing_without_the_capture_dir(tmp_path: Path) -> None:
    env = capture_env(tmp_path / "procs", FAKE)
    del env[ENV_DIR]
    out = subprocess.run([sys.executable, "-c", "import sys; print('tracer.capture.session' in sys.modules)"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False" and not (tmp_path / "procs").exists()


def test_bootstrap_chain_loads_the_next_sitecustomize(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nLOADED = os.getpid()\n")
    procs = tmp_path / "procs"
    env = capture_env(procs, FAKE)
    env["PYTHONPATH"] += os.pathsep + str(theirs)
    code = "import os, sitecustomize; print(sitecustomize.LOADED == os.getpid(), sitecustomize.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", str(theirs / "sitecustomize.py")], out.stderr
    assert read_markers(procs)[0].state == "exited"  # and tracer's session ran too
    assert sorted(p.name for p in BOOT.iterdir() if not p.name.startswith(("__pycache__", "."))) == ["sitecustomize.py"]


def test_unusable_options_fall_back_to_defaults() -> None:
    assert CaptureOptions.from_env("{not json") == CaptureOptions()
    assert CaptureOptions.from_env('{"backend": "nsys", "memory": 1}') == CaptureOptions(memory=True)
    assert CaptureOptions.from_env(CaptureOptions(backend="fake", memory=True, devices=("cpu",)).to_env()) == \
        CaptureOptions(backend="fake", memory=True, devices=("cpu",))


def test_several_processes_with_kernels_make_a_job(tmp_path: Path) -> None:
    procs = tmp_path
    for pid, kernels in ((11, 5), (12, 7), (13, 0)):
        (procs / f"h-{pid}.sqlite").write_text("")
        (procs / f"h-{pid}.json").write_text(json.dumps({"pid": pid, "host": "h", "state": "exited", "kernels": kernels}))
    assert pick_trace(read_markers(procs), procs) == (None, True)
    (procs / "h-12.sqlite").unlink()
    chosen, job = pick_trace(read_markers(procs), procs)
    assert chosen is not None and chosen.pid == 11 and not job
    (procs / "h-11.sqlite").unlink()
    assert pick_trace(read_markers(procs), procs) == (None, False)  # the launcher's empty trace never stands for the run


def test_commands_run_as_given() -> None:
    assert resolve_command(["torchrun", "--nproc-per-node", "2", "train.py"])[0] == "torchrun"
    assert resolve_command(["-m", "tracer", "run"]) == [sys.executable, "-m", "tracer", "run"]
    assert resolve_command(["python", "train.py"]) == [sys.executable, "train.py"]
    assert resolve_command(["/usr/bin/python3", "x.py"])[0] == "/usr/bin/python3"  # a path is kept as given
    with pytest.raises(UsageError, match="no command"):
        resolve_command([])


@pytest.mark.parametrize("ticking", [True, False])
def test_lingering_traced_process_is_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ticking: bool) -> None:
    """Also when the command exited before the sampler's first look at it (not ticking: the
    sampler looks only once the command is over), its orphan is found through its session."""
    from tracer.capture import launcher

    if not ticking:
        monkeypatch.setattr(launcher.TreeSampler, "run", lambda self: None)
    script = textwrap.dedent("""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"], start_new_session=False)
    """)
    t0 = time.monotonic()
    res, run = run_fake(tmp_path, script)
    states = [m.state for m in read_markers(run / "procs")]
    assert states == ["exited", "exited"] and time.monotonic() - t0 >= 2


def test_memory_needs_the_cupti_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    code = main(["trace", "run", "--memory", "--backend", "nsys", "-o", str(tmp_path / "r"), "--", "python", "x.py"])
    assert code == 2 and "--memory needs the cupti backend, not 'nsys'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_memory_recording_does_not_import_torch_into_every_process(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    env = capture_env(procs, replace(FAKE, memory=True, devices=("cpu",)))
    code = "import sys; print('torch' in sys.modules); import torch; (torch.ones(3) * 2).sum(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stderr
    m = read_markers(procs)[0]
    with sqlite3.connect(procs / f"{m.file}.sqlite") as con:
        names = {r[0] for r in con.execute("SELECT s.value FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId")}
    assert {"aten::ones", "aten::mul.Tensor", "aten::sum"} <= names  # the mode was entered when torch arrived


KERNELS_THEN = textwrap.dedent("""
    import os, signal, sys, time
    from tracer.capture.session import current
    s = current()
    for i in range(5):
        s.backend.fake_kernel(f"kernel_{i}")
    time.sleep(1.0)  # several periodic flushes
    how = sys.argv[1]
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    for i in range(3):  # never flushed before a SIGKILL
        s.backend.fake_kernel(f"late_{i}")
    sys.exit(int(how))
""")


def test_a_sigkilled_process_leaves_its_flushed_records_as_a_partial_trace(tmp_path: Path) -> None:
    res, run = run_fake(tmp_path, KERNELS_THEN, "sigkill", flush_s=0.1)
    assert res.proc.returncode == -signal.SIGKILL
    (m,) = res.processes
    assert (m.state, m.outcome, m.kernels) == ("died", "partial", 5)
    assert res.trace == run / "trace.sqlite" and res.partial and "died before writing" in res.failure()
    con = sqlite3.connect(run / "trace.sqlite")
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert "every 0.1 s" in meta["TRACER_PARTIAL"]
    names = {r[0] for r in con.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName")}
    assert names == {f"kernel_{i}" for i in range(5)}
    marker = json.loads((run / "procs" / f"{m.file}.json").read_text())
    assert marker["state"] == "died" and marker["kernels"] == 5 and marker["trace"] == f"{m.file}.sqlite"
    # what the process wrote while it ran is kept: how CUPTI started, and its timing up to its last flush
    assert marker["cupti_started_by"] == "start" and marker["timing"]["phases_s"]["periodic_flush"] > 0


def test_a_device_synchronisation_hands_over_the_records_with_a_forced_flush(tmp_path: Path) -> None:
    """CUPTI's periodic flush holds back a buffer while one of its records is in progress; right
    after the program synchronised the device nothing is, so a forced flush loses nothing and
    hands everything over: the first synchronisation at once (a short program's only one), later
    ones at most every sync_flush_s. A process killed later keeps it."""
    script = textwrap.dedent("""
        import os, signal, time, types
        from tracer.capture.session import current
        s = current()
        synced = []
        torch = types.SimpleNamespace(_C=types.SimpleNamespace(_cuda_synchronize=lambda: synced.append(1)))
        s.on_torch(torch)  # as torch.cuda.synchronize calls it
        s.backend.fake_kernel("early")
        torch._C._cuda_synchronize()  # the first: flushed at once, right after CUPTI's start
        torch._C._cuda_synchronize()  # within sync_flush_s: not again
        time.sleep(1.0)
        s.backend.fake_kernel("late")
        torch._C._cuda_synchronize()  # sync_flush_s later: flushed
        print(len(synced), s.backend.flushes.count(True), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    res, run = run_fake(tmp_path, script, flush_s=30, sync_flush_s=0.8)  # no periodic flush in this test
    assert (run / "logs" / "stdout.log").read_text().split() == ["3", "2"]
    (m,) = res.processes
    assert (m.outcome, m.kernels) == ("partial", 2)
    marker = json.loads((run / "procs" / f"{m.file}.json").read_text())
    assert marker["timing"]["phases_s"]["sync_flush"] >= 0 and marker["flushed_kernels"] == {"periodic": 0, "sync": 2}
    # the last flush is dated, and the time after it that the trace may miss is bounded
    assert marker["last_flush_unix_ns"] > marker["clock_start"][1] and 0 <= m.unflushed_s < 1.0


def test_a_process_that_exits_writes_everything_and_its_timing(tmp_path: Path) -> None:
    res, run = run_fake(tmp_path, KERNELS_THEN, "3", flush_s=0.1)
    (m,) = res.processes
    assert (m.state, m.outcome, m.kernels, m.exit) == ("exited", "complete", 8, None)
    assert res.proc.returncode == 3 and res.failure() == "the traced command exited 3"
    with sqlite3.connect(run / "trace.sqlite") as con:
        assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (8,)
        assert "TRACER_PARTIAL" not in dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    timing = json.loads((run / "process.json").read_text())["timing"]
    assert timing["startup_s"] is not None and timing["alive_s"] >= 1.0
    assert {"bootstrap", "bootstrap_imports", "periodic_flush", "exit_total"} <= set(timing["phases_s"])
    assert "cupti_started" in timing["marks_s"]


def test_cupti_starts_at_the_first_cuda_library_import_only(tmp_path: Path) -> None:
    (tmp_path / "fakecuda.py").write_text("LOADED = True\n")
    script = textwrap.dedent("""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "import json"], check=True)  # never touches CUDA
        sys.path.insert(0, sys.argv[1])
        import fakecuda
        from tracer.capture.session import current
        current().backend.fake_kernel("after_import")
    """)
    res, run = run_fake(tmp_path, script, str(tmp_path), lazy=True, triggers=("fakecuda",))
    assert res.proc.returncode == 0, (run / "logs" / "stderr.log").read_text()
    by_outcome = {m.outcome: m for m in res.processes}
    assert set(by_outcome) == {"complete", "no CUDA"} and res.failure() == ""
    idle = json.loads((run / "procs" / f"{by_outcome['no CUDA'].file}.json").read_text())
    assert idle["trace"] is None and idle["cuda"] is False and "cupti_started" not in idle["timing"]["marks_s"]
    assert not list((run / "procs").glob(f"{idle['file']}*.sqlite"))
    busy = json.loads((run / "process.json").read_text())
    assert busy["cupti_started_by"] == "import fakecuda" and busy["kernels"] == 1


def test_sigterm_during_the_exit_write_waits_for_it(tmp_path: Path) -> None:
    """torchrun stops the surviving ranks with SIGTERM, often while they are already writing their
    trace at exit: the handler must not kill the write it interrupted."""
    procs = tmp_path / "procs"
    code = textwrap.dedent("""
        import os, signal, time
        from tracer.capture import session
        s = session.current()
        s.backend.fake_kernel("k")
        write = s._write_trace
        def slow(*args):
            os.kill(os.getpid(), signal.SIGTERM)  # arrives in the middle of the exit write
            time.sleep(0.3)
            return write(*args)
        s._write_trace = slow
    """)
    out = subprocess.run([sys.executable, "-c", code], env=capture_env(procs, FAKE), timeout=60)
    assert out.returncode == -signal.SIGTERM  # it still dies of the signal, once the trace is written
    (m,) = read_markers(procs)
    assert m.state == "exited" and m.ended == "atexit" and m.kernels == 1
    assert (procs / f"{m.file}.sqlite").is_file() and not list(procs.glob("*.partial.sqlite"))


def test_process_lines_say_how_each_ended() -> None:
    base = Marker(file="h-1-r0", pid=1, host="h", rank=0, state=State.EXITED)
    assert "stopped by SIGTERM" in describe(base.with_(ended="sigterm", outcome=Outcome.COMPLETE, kernels=4))
    line = describe(base.with_(state=State.DIED, outcome=Outcome.PARTIAL, kernels=2))
    assert "died without exiting" in line and "PARTIAL trace, 2 kernels" in line
    assert "NO TRACE" in describe(base.with_(state=State.DIED, outcome=Outcome.NO_TRACE))
    assert "no CUDA use" in describe(base.with_(file="h-2", rank=None, exit=0, outcome=Outcome.NO_CUDA))


def test_many_quiet_processes_fold_into_one_line() -> None:
    """torch.compile's worker pool: a dozen fork children that exit 0 with no kernels are one line;
    the process with kernels, and any that ended badly, stay listed."""
    from types import SimpleNamespace

    from tracer.app.trace_run import process_notices

    main_proc = Marker(file="h-1", pid=1, host="h", state=State.EXITED, exit=0, outcome=Outcome.COMPLETE, kernels=633)
    workers = [main_proc.with_(file=f"h-{i}", pid=i, kernels=0, fork_child=True) for i in range(10, 22)]
    crashed = workers[0].with_(file="h-99", pid=99, exit=1)
    lines = process_notices(SimpleNamespace(processes=[main_proc, *workers, crashed], partial=False), Path("run"), False)
    assert lines[0] == "processes (14):" and len(lines) == 4, lines
    assert "h-1 " in lines[1] and "h-99" in lines[2] and "exited 1" in lines[2]
    assert lines[3] == "  ... and 12 more processes (12 of them fork children) that exited 0 with no CUDA kernels: each in command.json"
    two = process_notices(SimpleNamespace(processes=[main_proc, *workers[:2]], partial=False), Path("run"), False)
    assert len(two) == 4 and not any("more processes" in line for line in two)  # a few are listed one by one


RANK = ("import os, signal, time\n"
        "from tracer.capture.session import current\n"
        "current().backend.fake_kernel('allreduce')\n"
        "time.sleep(0.6)\n"
        "if os.environ['RANK'] == '1':\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")
RANKS = textwrap.dedent(f"""
    import os, subprocess, sys
    ranks = [subprocess.Popen([sys.executable, "-c", {RANK!r}], env=os.environ | {{"RANK": str(r), "WORLD_SIZE": "2"}})
             for r in range(2)]
    codes = [p.wait() for p in ranks]
    sys.exit(1 if any(codes) else 0)
""")


def fake_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, script: str) -> tuple[list[str], Path]:
    """`trace run` on the fake backend (the CPU stands in for CUPTI)."""
    from tests import fake_tools
    from tracer import gpu
    from tracer.capture import launcher

    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    real = launcher.capture_run
    monkeypatch.setattr(launcher, "capture_run", lambda *a, **k: real(*a, options=replace(FAKE, flush_s=0.1),
                                                                      describe=k.get("describe", False)))
    prog = tmp_path / "prog.py"
    prog.write_text(script)
    return ["trace", "run", "--backend", "cupti", "-o", str(tmp_path / "run"), "--", sys.executable, str(prog)], tmp_path / "run"


def test_a_job_whose_rank_died_fails_and_says_how_each_process_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    argv, run = fake_cli(monkeypatch, tmp_path, RANKS)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 7, err  # the traced command failed: TargetFailed, after the job was analysed
    assert "exited 1" in err.splitlines()[-1] and "written and analysed all the same" in err.splitlines()[-1]
    assert "JOB INCOMPLETE: rank 1" in out and "PARTIAL, died without exiting" in out and "processes (3):" in out
    assert "== rank 0 (" in out and "== rank 1 (" in out and "partial traces, verdicts cover only" in out
    command = json.loads((run / "command.json").read_text())
    ranks = {p["rank"]: p for p in command["processes"] if p["rank"] is not None}
    assert (ranks[0]["outcome"], ranks[1]["outcome"], ranks[1]["state"]) == ("complete", "partial", "died")
    assert command["job"] and not (run / "trace.sqlite").exists() and "job: 2 processes" in err
    own = command["tracer_s"]  # tracer's own seconds around the command, by part
    assert set(own) == {"gpu_check", "before_command", "after_command"} and all(0 <= v < 30 for v in own.values())
    launcher_proc = next(p for p in command["processes"] if p["rank"] is None)
    assert launcher_proc["kernels"] == 0 and launcher_proc["outcome"] == "complete"
    verdict = json.loads((run / "verdict.json").read_text())  # the job JSON, as `trace analyze` gives it
    assert verdict["kind"] == "job" and verdict["partial"] is True and verdict["target_exit"] == 1
    assert verdict["source"] == str(run) and [a["process"] for a in verdict["analyses"]] == ["rank 0", "rank 1", f"pid {launcher_proc['pid']}"]
    assert [a["outcome"] for a in verdict["analyses"]][:2] == ["complete", "partial"] and not verdict["complete"]
    assert all(a["source"].startswith(str(run / "procs")) for a in verdict["analyses"])  # not the temporary name


@pytest.mark.parametrize("exit_code, expected", [(0, 2), (1, 7)])
def test_a_run_without_kernels_is_never_an_empty_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], exit_code: int,
                                                          expected: int) -> None:
    from tracer.cli import main

    argv, run = fake_cli(monkeypatch, tmp_path, f"import sys; sys.exit({exit_code})\n")
    code = main(argv)
    captured = capsys.readouterr()
    assert code == expected and captured.out == ""  # no verdict printed
    assert ("no process of the command recorded a CUDA kernel" if exit_code == 0 else "exited 1") in captured.err
    failed = run.with_name("run.failed")  # a capture that left nothing to analyse failed: its files kept
    assert not run.exists() and (failed / "command.json").is_file() and not (failed / "verdict.json").exists()
    assert str(failed) in captured.err and "(1 traced process: 1 complete" in captured.err  # its trace: no kernels


def test_a_job_is_analysed_as_one_and_checked_process_by_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Several processes with kernels: `trace run` analyses the job as `trace analyze` reads it, and
    the checks asked for apply to every process with kernels (here: no memory sets, so hazards
    cannot be checked in either rank; the launcher traced without kernels has nothing to judge)."""
    from tracer.cli import main

    script = RANKS.replace("== '1'", "== 'no rank'")
    assert script != RANKS  # no rank is killed
    argv, run = fake_cli(monkeypatch, tmp_path, script)
    dashes = argv.index("--")
    code = main(argv[:dashes] + ["--fail-on-hazard"] + argv[dashes:])
    out, err = capsys.readouterr()
    assert code == 1 and "job: 2 processes recorded kernels" in err and json.loads((run / "command.json").read_text())["job"]
    assert out.startswith(f"job {run}: 3 processes (2 ranks), 2 kernels") and "JOB INCOMPLETE" not in out
    last = err.splitlines()[-1]
    assert last.startswith("tracer: error: rank 0: hazards cannot be checked") and "rank 1: hazards cannot be checked" in last
    assert "pid " not in last
    assert main(["trace", "analyze", str(run), "--json"]) == 0  # the same job read back, no check asked for
    again = json.loads(capsys.readouterr().out)
    assert again["kind"] == "job" and again["complete"] and again["kernels"] == 2
    assert again["job"]["processes"] == json.loads((run / "verdict.json").read_text())["job"]["processes"]


def test_importing_torch_does_not_start_cupti(tmp_path: Path) -> None:
    """torch imports cuda.bindings at its own import: only its CUDA initialisation, or a library
    that means CUDA use, starts CUPTI (torchrun's agent imports torch and never uses CUDA)."""
    procs = tmp_path / "procs"
    env = capture_env(procs, replace(FAKE, lazy=True))
    subprocess.run([sys.executable, "-c", "import torch, torch.distributed.run"], env=env, check=True, timeout=120)
    (m,) = read_markers(procs)
    assert m.trace is None and m.cupti_started_by is None and "cupti_started" not in m.timing["marks_s"]


class FakeLibcuda:
    """The driver calls devices() makes, answering through the ctypes references it is given:
    two GPUs, a context on the second only."""

    def cuDeviceGetCount(self, count) -> int:
        count._obj.value = 2
        return 0

    def cuDeviceGet(self, dev, ordinal: int) -> int:
        dev._obj.value = ordinal
        return 0

    def cuDevicePrimaryCtxGetState(self, dev, flags, active) -> int:
        active._obj.value = int(dev.value == 1)
        return 0

    def cuDeviceGetName(self, name, size: int, dev) -> int:
        name.value = b"NVIDIA H200"
        return 0

    def cuDeviceGetAttribute(self, cell, attribute: int, dev) -> int:
        cell._obj.value = {75: 9, 76: 0, 16: 132}[attribute]
        return 0

    def cuDeviceTotalMem_v2(self, memory, dev) -> int:
        memory._obj.value = 150_110_961_664
        return 0

    def cuDriverGetVersion(self, version) -> int:
        version._obj.value = 13000
        return 0


def test_devices_name_the_gpus_a_process_holds_a_context_on() -> None:
    from tracer.capture.session import _active_devices, _describe

    lib = FakeLibcuda()
    assert _describe(lib, _active_devices(lib)) == [
        {"ordinal": 1, "name": "NVIDIA H200", "sm": "90", "sms": 132, "memory_gb": 139.8, "cuda": "13.0"}]
