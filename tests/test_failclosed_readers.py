"""Readers of run-directory and user files are bounded: a FIFO, a device (/dev/zero, /dev/urandom),
a directory or a symlink to one is refused at once, naming what it is; a marker, command.json,
verdict.json, profile.json or a campaign store's profile over its size limit or nested past its
depth limit is refused within a second and a few MB; a sanitizer log line of any length and a
gzip bomb are read in bounded memory. Each is one line, never a traceback or a hang."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.cli import main
from tracer.errors import TraceFormatError
from tracer.sanitize.parse_text import LINE_LIMIT, parse_text
from tracer.store.inputs import JSON_DEPTH_LIMIT, RUN_FILE_LIMIT, load_json, read_limited

ROOT = Path(__file__).resolve().parent.parent
CTD = DATA / "traces" / "cast_transpose_dgrad.sqlite"
JOB = DATA / "jobs"
SECONDS, PEAK_BYTES = 1.0, 200 << 20


@contextmanager
def measured() -> Iterator[dict[str, float]]:
    """The block's wall seconds and peak traced memory (bytes), filled in when it ends."""
    got: dict[str, float] = {}
    tracemalloc.start()
    start = time.monotonic()
    try:
        yield got
    finally:
        got["seconds"] = time.monotonic() - start
        got["peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def _job_dir(tmp_path: Path) -> Path:
    """A copy of a real job run directory (procs/ with markers), or skip."""
    src = next((p for p in sorted(JOB.iterdir()) if (p / "procs").is_dir()), None) if JOB.is_dir() else None
    if src is None:
        pytest.skip(f"no job run directory with procs/ under {JOB}")
    run = tmp_path / "run"
    shutil.copytree(src, run, symlinks=True)
    return run


@pytest.mark.parametrize("special, words", [("fifo", "is a FIFO"), ("/dev/zero", "is a character device"),
                                            ("/dev/urandom", "is a character device"), ("dir", "is a directory")])
def test_special_files_given_as_input_are_named(tmp_path: Path, special: str, words: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "x.sqlite"
    if special == "fifo":
        os.mkfifo(target)
    elif special == "dir":
        (tmp_path / "d").mkdir()
        target.symlink_to(tmp_path / "d")
        words = "not a run directory"  # a directory (or a link to one) is read as a run directory
    else:
        target.symlink_to(special)
    start = time.monotonic()
    for argv in (["trace", "analyze", str(target)], ["sanitize", "import", str(target)], ["plot", "ablation", str(target),
                 "-o", str(tmp_path / "a.png")], ["campaign", "status", str(target)], ["campaign", "report", str(target)],
                 ["run", str(target)], ["campaign", "run", str(target)]):
        code, err = _run(argv, capsys)
        assert code in (2, 6) and err.count("\n") == 1, (argv, err)
        if argv[0] != "run" and argv[:2] != ["campaign", "run"] and special != "dir":
            assert words in err, (argv, err)
        assert "no such file" not in err and "unknown campaign profile" not in err and "no campaign store here" not in err
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("special, words", [("fifo", "is a FIFO"), ("/dev/zero", "is a character device"),
                                            ("/dev/urandom", "is a character device")])
def test_profiles_that_are_not_files_are_named(tmp_path: Path, special: str, words: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "w.yaml"
    if special == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(special)
    for argv in (["run", str(target)], ["campaign", "run", str(target)], ["trace", "run", str(target)]):
        code, err = _run(argv, capsys)
        assert code == 2 and words in err and err.count("\n") == 1, (argv, err)


@pytest.mark.parametrize("name", ["command.json", "verdict.json", "environment.json", "procs/marker"])
@pytest.mark.parametrize("bad", ["fifo", "/dev/zero", "deep", "huge", "not-json", "list"])
def test_hostile_run_directory_files_are_refused_quickly(tmp_path: Path, name: str, bad: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run = _job_dir(tmp_path)
    path = sorted((run / "procs").glob("*.json"))[0] if name == "procs/marker" else run / name
    path.unlink(missing_ok=True)
    if bad == "fifo":
        os.mkfifo(path)
    elif bad == "/dev/zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text({"deep": "[" * 100_000 + "]" * 100_000, "huge": '{"x": "' + "a" * (RUN_FILE_LIMIT + 1) + '"}',
                         "not-json": "{nope", "list": "[1, 2]"}[bad])
    with measured() as m:
        code, err = _run(["trace", "analyze", str(run)], capsys)
    took, peak = m["seconds"], m["peak"]
    assert code == 6 and err.count("\n") == 1 and "Traceback" not in err, err
    assert path.name in err
    assert took < 10 and peak < PEAK_BYTES, (took, peak)  # the whole analysis; the refusal itself is timed below


@pytest.mark.parametrize("bad", ["deep", "huge", "fifo", "/dev/zero", "/dev/urandom"])
def test_one_bounded_json_read_is_refused_within_a_second_and_200_mb(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "marker.json"
    if bad == "fifo":
        os.mkfifo(path)
    elif bad.startswith("/dev/"):
        path.symlink_to(bad)
    elif bad == "deep":
        path.write_text("[" * 1_000_000 + "]" * 1_000_000)
    else:
        with open(path, "wb") as fh:
            fh.truncate(20 << 30)  # 20 GB, sparse: what a marker symlinked to /dev/zero grew to
    with measured() as m, pytest.raises(TraceFormatError) as info:
        load_json(path, "a process marker")
    took, peak = m["seconds"], m["peak"]
    assert took < SECONDS and peak < PEAK_BYTES, (took, peak)
    text = str(info.value)
    assert "\n" not in text and str(path) in text
    assert {"deep": f"nested deeper than {JSON_DEPTH_LIMIT}", "huge": "more than a process marker may be",
            "fifo": "is a FIFO"}.get(bad, "is a character device") in text


def test_depth_within_the_decoder_but_past_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"a": ' + "[" * (JSON_DEPTH_LIMIT + 5) + "]" * (JSON_DEPTH_LIMIT + 5) + "}")
    with pytest.raises(TraceFormatError, match="nested deeper"):
        load_json(path, "a process marker")
    path.write_text('{"a": ' + "[" * (JSON_DEPTH_LIMIT - 2) + "]" * (JSON_DEPTH_LIMIT - 2) + "}")
    assert isinstance(load_json(path, "a process marker"), dict)


def test_read_limited_reads_a_regular_file_whole() -> None:
    assert read_limited(CTD, CTD.stat().st_size, "a trace") == CTD.read_bytes()
    with pytest.raises(TraceFormatError, match="more than a trace may be"):
        read_limited(CTD, CTD.stat().st_size - 1, "a trace")


def _store_with_profile(path: Path, value: object) -> None:
    from tracer.campaign.grid import load_campaign
    from tracer.campaign.trials_db import Store

    prof = path.parent / "c.yaml"
    prof.write_text("schema: 1\nname: t\nworkload: cpu_reference\ntrials_per_cell: 2\n")
    store = Store.open(path, create=True)
    store.init(load_campaign(str(prof)), {})
    store.con.execute("UPDATE campaign SET value = ? WHERE key = 'profile'", (value,))
    store.con.close()


@pytest.mark.parametrize("value, words", [("[" * 100_000 + "]" * 100_000, "nested deeper"), ("not json {", "not readable JSON"),
                                          ("[1, 2]", "must be a JSON object"), (b"\x00\x01", "not JSON text"),
                                          ('"' + "x" * (RUN_FILE_LIMIT + 1) + '"', "not JSON text of at most")],
                         ids=["deep", "not-json", "list", "blob", "huge"])
def test_a_campaign_store_profile_that_is_not_json_is_one_line(tmp_path: Path, value: object, words: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    _store_with_profile(store, value)
    for argv in (["campaign", "report", str(store)], ["campaign", "report", str(store), "--json"]):  # what reads the profile
        code, err = _run(argv, capsys)
        assert code == 6 and words in err and err.count("\n") == 1, (argv, err)


def test_a_profile_json_nested_or_huge_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "prof"
    run.mkdir()
    for text, words in (("[" * 100_000 + "]" * 100_000, "nested deeper"), ("{" + " " * (70 << 20) + "}", "more than profile.json")):
        (run / "profile.json").write_text(text)
        code, err = _run(["report", str(run), "-o", str(tmp_path / "r.html")], capsys)
        assert code == 6 and words in err and err.count("\n") == 1, err


def test_a_sanitizer_log_line_of_any_length_is_read_in_bounded_memory(tmp_path: Path) -> None:
    log = tmp_path / "memcheck.log"
    with open(log, "w") as fh:
        fh.write("========= COMPUTE-SANITIZER\n")
        fh.write("x" * (64 << 20) + "\n")  # the target's output: one 64 MB line (the report's was 1.5 GB)
        fh.write("========= " + "y" * (8 << 20) + "\n")  # and a tool line far past LINE_LIMIT
        fh.write("========= ERROR SUMMARY: 0 errors\n")
    with measured() as m:
        parsed = parse_text(log, "memcheck")
    peak = m["peak"]
    assert parsed.reported_errors == 0 and parsed.recognised
    assert peak < 16 * LINE_LIMIT + (4 << 20), peak


def test_a_gzip_bomb_is_refused_before_it_expands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = tmp_path / "t.json.gz"
    events = b'{"traceEvents": [' + b"{}," * 100_000_000 + b"{}]}"  # 300 MB of empty events
    bomb.write_bytes(gzip.compress(events, 9))
    del events
    assert bomb.stat().st_size < 1 << 20
    with measured() as m:
        code, err = _run(["trace", "analyze", str(bomb)], capsys)
    took, peak = m["seconds"], m["peak"]
    assert code == 6 and "gzip expands more than" in err and err.count("\n") == 1, err
    assert took < 10 and peak < 64 << 20, (took, peak)


def test_a_real_sized_gzip_trace_is_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7, "ts": 1000.5 + i * 3.25, "dur": 1.5 + i % 3,
               "args": {"device": 0, "stream": 7 + i % 2, "correlation": i}} for i in range(100_000)]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    code, err = _run(["trace", "analyze", str(path)], capsys)
    assert code == 0, err


def test_a_fifo_in_procs_never_blocks(tmp_path: Path) -> None:
    run = _job_dir(tmp_path)
    os.mkfifo(run / "procs" / "zz-host-1.json")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "tracer", "trace", "analyze", str(run)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert res.returncode == 6 and "is a FIFO" in res.stderr and res.stderr.count("\n") == 1, res.stderr
