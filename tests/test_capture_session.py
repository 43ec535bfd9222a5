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
from pathlib import Path

import pytest

from tracer.capture.launcher import BOOT, capture_env, capture_run, pick_trace, read_markers, resolve_command
from tracer.capture.options import ENV_DIR, CaptureOptions
from tracer.capture.session import file_stem
from tracer.errors import UsageError

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


def run_fake(tmp_path: Path, script: str, *args: str, memory: bool = False, timeout: float = 120):  # type: ignore[no-untyped-def]
    prog = tmp_path / "prog.py"
    prog.write_text(script)
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    res = capture_run([sys.executable, str(prog), *args], run, run / "logs", timeout, backend="fake", memory=memory,
                      devices=("cpu",))
    return res, run


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return run_fake(tmp_path_factory.mktemp("family"), FAMILY)


def test_every_process_of_nested_spawn_and_fork_children_writes_its_own_files(family) -> None:  # type: ignore[no-untyped-def]
    res, run = family
    assert res.proc.returncode == 0, (run / "logs" / "stderr.log").read_text()
    out = (run / "logs" / "stdout.log").read_text()
    markers = {m["pid"]: m for m in read_markers(run / "procs")}
    root = next(m for m in markers.values() if m["ppid"] == os.getpid())
    leaves = {line.split()[1]: (int(line.split()[2]), int(line.split()[3])) for line in out.splitlines() if line.startswith("leaf")}
    assert set(leaves) == {"spawn-grandchild", "fork-grandchild"}
    for tag, (pid, ppid) in leaves.items():
        m = markers[pid]
        assert m["file"] == file_stem(m["host"], pid, None) and m["ppid"] == ppid
        assert markers[ppid]["ppid"] == root["pid"]  # a child of a child of the traced command
        assert m["state"] == "exited" and (run / "procs" / f"{m['file']}.sqlite").is_file()
        assert m["fork_child"] is (tag == "fork-grandchild")
    fork_leaf = markers[leaves["fork-grandchild"][0]]
    assert fork_leaf["ended"] == "finalizer" and fork_leaf["fork_parent"] == fork_leaf["ppid"]
    assert all(m["backend"] == "fake" for m in markers.values())


def test_a_killed_child_leaves_a_marker_without_a_trace(family) -> None:  # type: ignore[no-untyped-def]
    res, run = family
    killed = int(next(line for line in (run / "logs" / "stdout.log").read_text().splitlines() if line.startswith("killed")).split()[1])
    m = next(m for m in read_markers(run / "procs") if m["pid"] == killed)
    assert m["state"] == "running" and not (run / "procs" / f"{m['file']}.sqlite").exists()
    listed = {p["pid"]: p for p in res.command_fields()["processes"]}
    assert listed[killed]["state"] == "running"


def test_non_python_children_are_listed_as_untraced(family) -> None:  # type: ignore[no-untyped-def]
    res, _ = family
    fields = res.command_fields()
    assert any(u["comm"] == "sleep" and u["cmdline"] == ["sleep", "1"] for u in fields["untraced"])
    traced = {p["pid"] for p in fields["processes"]}
    assert not traced & {u["pid"] for u in fields["untraced"]}
    assert "sampled every" in fields["untraced_note"]


def test_one_traced_process_without_kernels_stands_for_the_run(family) -> None:  # type: ignore[no-untyped-def]
    res, run = family
    process = json.loads((run / "process.json").read_text())
    assert res.trace == run / "trace.sqlite" and not res.job
    assert process["ppid"] == os.getpid()  # the command itself, the only process tracer started directly
    con = sqlite3.connect(run / "trace.sqlite")
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert meta["TRACER_PRODUCER"] == "fake" and meta["TRACER_PROCESS"] == process["file"]
    assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (0,)


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
    child = next(m for m in markers if m.get("fork_child"))
    with sqlite3.connect(procs / f"{child['file']}.sqlite") as con:
        names = [r[0] for r in con.execute("SELECT s.value FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId")]
    assert "aten::add.Tensor" in names and "aten::mul.Tensor" not in names and "aten::sub.Tensor" not in names
    with sqlite3.connect(run / "trace.sqlite") as con:
        parent = [r[0] for r in con.execute("SELECT s.value FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId")]
    assert "aten::mul.Tensor" in parent and "aten::sub.Tensor" in parent and "aten::add.Tensor" not in parent


def test_sigterm_writes_the_trace_before_dying(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    env = capture_env(procs, CaptureOptions(backend="fake"))
    child = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"], env=env,
                             stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"up"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) in (-signal.SIGTERM, 128 + signal.SIGTERM)  # it still dies of the signal
    m = read_markers(procs)[0]
    assert m["state"] == "exited" and m["ended"] == "sigterm" and m["exit"] == 128 + signal.SIGTERM
    assert (procs / f"{m['file']}.sqlite").is_file()


def test_sigterm_reaches_a_process_whose_main_thread_is_stuck(tmp_path: Path) -> None:
    """A rank blocked in a collective for a dead peer never runs Python signal handlers: the
    watcher thread writes its trace (here the main thread blocks SIGTERM and sleeps)."""
    procs = tmp_path / "procs"
    code = ("import signal, time\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])\n"
            "print('up', flush=True); time.sleep(120)\n")
    child = subprocess.Popen([sys.executable, "-c", code], env=capture_env(procs, CaptureOptions(backend="fake")),
                             stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"up"
    t0 = time.monotonic()
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=60) == 128 + signal.SIGTERM and time.monotonic() - t0 < 60
    m = read_markers(procs)[0]
    assert m["ended"] == "sigterm" and (procs / f"{m['file']}.sqlite").is_file()


def test_a_programs_own_sigterm_handler_is_left_alone(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: (print('mine', flush=True), sys.exit(5)))\n"
            "print('up', flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], env=capture_env(procs, CaptureOptions(backend="fake")),
                             stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"up"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 5 and child.stdout.read().strip() == b"mine"
    assert read_markers(procs)[0]["ended"] == "atexit"  # its handler exited normally: the trace was written at exit


def test_rank_from_the_environment_names_the_files(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    env = capture_env(procs, CaptureOptions(backend="fake")) | {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, timeout=60)
    m = read_markers(procs)[0]
    assert m["file"].endswith(f"-{m['pid']}-r3") and (m["rank"], m["local_rank"], m["world_size"]) == (3, 1, 4)


def test_bootstrap_does_nothing_without_the_capture_dir(tmp_path: Path) -> None:
    env = capture_env(tmp_path / "procs", CaptureOptions(backend="fake"))
    del env[ENV_DIR]
    out = subprocess.run([sys.executable, "-c", "import sys; print('tracer.capture.session' in sys.modules)"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False" and not (tmp_path / "procs").exists()


def test_bootstrap_chain_loads_the_next_sitecustomize(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nLOADED = os.getpid()\n")
    procs = tmp_path / "procs"
    env = capture_env(procs, CaptureOptions(backend="fake"))
    env["PYTHONPATH"] += os.pathsep + str(theirs)
    code = "import os, sitecustomize; print(sitecustomize.LOADED == os.getpid(), sitecustomize.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", str(theirs / "sitecustomize.py")], out.stderr
    assert read_markers(procs)[0]["state"] == "exited"  # and tracer's session ran too
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
        (procs / f"h-{pid}.json").write_text(json.dumps({"pid": pid, "state": "exited", "kernels": kernels}))
    assert pick_trace(read_markers(procs), procs, 13) == (None, True)
    (procs / "h-12.sqlite").unlink()
    chosen, job = pick_trace(read_markers(procs), procs, 13)
    assert chosen is not None and chosen["pid"] == 11 and not job


def test_commands_run_as_given() -> None:
    assert resolve_command(["torchrun", "--nproc-per-node", "2", "train.py"])[0] == "torchrun"
    assert resolve_command(["-m", "tracer", "run"]) == [sys.executable, "-m", "tracer", "run"]
    assert resolve_command(["python", "train.py"]) == [sys.executable, "train.py"]
    assert resolve_command(["/usr/bin/python3", "x.py"])[0] == "/usr/bin/python3"  # a path is kept as given
    with pytest.raises(UsageError, match="no command"):
        resolve_command([])


def test_lingering_traced_process_is_waited_for(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"], start_new_session=False)
    """)
    t0 = time.monotonic()
    res, run = run_fake(tmp_path, script)
    states = [m["state"] for m in read_markers(run / "procs")]
    assert states == ["exited", "exited"] and time.monotonic() - t0 >= 2


def test_memory_needs_the_cupti_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    code = main(["trace", "run", "--memory", "--backend", "nsys", "-o", str(tmp_path / "r"), "--", "python", "x.py"])
    assert code == 2 and "--memory needs the cupti backend, not 'nsys'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_memory_recording_does_not_import_torch_into_every_process(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    env = capture_env(procs, CaptureOptions(backend="fake", memory=True, devices=("cpu",)))
    code = "import sys; print('torch' in sys.modules); import torch; (torch.ones(3) * 2).sum(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stderr
    m = read_markers(procs)[0]
    with sqlite3.connect(procs / f"{m['file']}.sqlite") as con:
        names = {r[0] for r in con.execute("SELECT s.value FROM TRACER_OPS o JOIN StringIds s ON s.id = o.nameId")}
    assert {"aten::ones", "aten::mul.Tensor", "aten::sum"} <= names  # the mode was entered when torch arrived
