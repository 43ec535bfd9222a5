"""Issue 25, round three: new members of each class the issue lists, found by trying them on copies
of real outputs (scripts/hostile_inputs.py holds them all as rows of docs/bad-inputs.md). One test
per class: a name the file system holds as bytes opens that file; two CUDA contexts sharing a stream
id are not read as one stream; damaged stores and ncu exports are refused, not reported as empty;
diff's outputs never overwrite its inputs, and an output named as a folder is refused; NVTX ranges
nested thousands deep plot in bounded time; invisible format characters are escaped on terminals
and in HTML pages; a process trace that is a socket is named as one."""
from __future__ import annotations

import csv
import io
import os
import shutil
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.trace_synthetic import copy_with
from tracer.cli import main
from tracer.views.report.html import Report
from tracer.textsafe import shown

CTD = DATA / "traces" / "cast_transpose_dgrad.sqlite"
NSYS = DATA / "nsys" / "planted_cross_stream.sqlite"
NCU = DATA / "ncu" / "cast_transpose_1024.raw.csv"
JOB = DATA / "jobs" / "ddp_gloo_2ranks"
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
CAMPAIGN = "schema: 1\nname: t\nworkload: cpu_reference\nvariants: [none, device_before_atomic]\ntrials_per_cell: 4\n"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_file_name_that_is_not_utf8_opens_that_very_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The SQLite URI is built from the name's bytes: b't\\xff.sqlite' was a UnicodeEncodeError (exit 70)."""
    name = os.fsdecode(b"t\xff.sqlite")
    shutil.copy(CTD, tmp_path / name)
    code, out, err = _run(["trace", "analyze", str(tmp_path / name)], capsys)
    assert code == 0 and "UNORDERED" in out, err
    assert "\\udcff" in out.splitlines()[0]  # the undecodable byte is shown escaped
    assert sorted(os.listdir(tmp_path)) == [name]


@pytest.mark.parametrize("src", [CTD, NSYS], ids=["tracer-capture", "nsys-export"])
def test_two_contexts_of_one_process_sharing_a_stream_id_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     src: Path) -> None:
    """Stream ids are unique within a context: kernels of contexts 1 and 2 on 'stream 7' of one
    device were judged by stream order (CTD: exit 0, every pair ordered)."""
    code, _, _ = _run(["trace", "analyze", str(src), "--fail-on-unordered"], capsys)
    intact = code
    copy_with(src, tmp_path / "t.sqlite", f"UPDATE {KERNELS} SET contextId = 2 WHERE rowid % 2 = 0")
    code, out, err = _run(["trace", "analyze", str(tmp_path / "t.sqlite"), "--fail-on-unordered"], capsys)
    assert intact in (0, 1) and code == 6 and out == ""
    assert "runs work of contexts 1 and 2" in err and err.count("\n") == 1


def _store(path: Path, *sql: str) -> None:
    from tracer.campaign.grid import load_campaign
    from tracer.campaign.trials_db import Store

    (path.parent / "c.yaml").write_text(CAMPAIGN)
    store = Store.open(path, create=True)
    store.init(load_campaign(str(path.parent / "c.yaml")), {})
    store.con.close()
    with sqlite3.connect(path) as con:
        for statement in sql:
            con.execute(statement)


@pytest.mark.parametrize(("sql", "words"), [("DELETE FROM cells", "no cells"), ("DELETE FROM campaign", "no campaign name"),
                                            ("UPDATE campaign SET value = X'00' WHERE key = 'name'", "no campaign name")])
def test_a_campaign_store_without_its_cells_or_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str,
                                                               words: str) -> None:
    """Such a store reported a table of no cells (or 'campaign None'), exit 0."""
    _store(tmp_path / "s.sqlite")
    for command in ("status", "report"):
        assert _run(["campaign", command, str(tmp_path / "s.sqlite")], capsys)[0] == 0
    _store(tmp_path / "d.sqlite", sql)
    for command in ("status", "report"):
        code, out, err = _run(["campaign", command, str(tmp_path / "d.sqlite")], capsys)
        assert code == 6 and out == "" and words in err and err.count("\n") == 1


def _ncu(path: Path, change: object) -> None:
    rows = list(csv.reader(io.StringIO(NCU.read_text(encoding="utf-8-sig"))))
    rows = change(rows)  # type: ignore[operator]  # the cases pass any callable as change
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())


@pytest.mark.parametrize(("change", "words"), [
    (lambda rows: [r + [r[0]] for r in rows], "appears 2 times in the header"),
    (lambda rows: [*rows[:3], [rows[2][0], *rows[3][1:]], *rows[4:]], "launch ID 0 is given twice")])
def test_an_ncu_export_with_a_repeated_column_or_launch_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   change: object, words: str) -> None:
    """Both were imported (a repeated ID shown as two launches 0; the last of two columns silently won)."""
    _ncu(tmp_path / "r.csv", change)
    code, out, err = _run(["profile", "import", str(tmp_path / "r.csv"), "-o", str(tmp_path / "run")], capsys)
    assert code == 6 and words in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("option", ["--html", "--plot"])
def test_diff_never_writes_over_its_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str) -> None:
    """`diff a.sqlite b.sqlite --html a.sqlite` replaced trace A by the page (exit 0)."""
    shutil.copy(CTD, tmp_path / "a.sqlite")
    out_name = "a.sqlite" if option == "--html" else "b.svg"
    if option == "--plot":
        (tmp_path / "b.svg").symlink_to(tmp_path / "a.sqlite")
    code, _, err = _run(["diff", str(tmp_path / "a.sqlite"), str(CTD), option, str(tmp_path / out_name)], capsys)
    assert code == 2 and "would destroy the input" in err
    assert (tmp_path / "a.sqlite").read_bytes() == CTD.read_bytes()


@pytest.mark.parametrize("argv", [["report", str(CTD), "-o", "{d}/new/"], ["trace", "export", str(CTD), "--perfetto", "-o", "{d}/p/"],
                                  ["plot", "stream-timeline", str(CTD), "-o", "{d}/t/"]])
def test_a_file_output_named_as_a_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """`-o new/` wrote a file named `new`."""
    with pytest.raises(SystemExit) as exc:
        main([a.replace("{d}", str(tmp_path)) for a in argv])
    assert exc.value.code == 2 and "names a folder" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_nvtx_ranges_nested_thousands_deep_plot_in_bounded_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """3,000 nested ranges took 200 s to plot (one matplotlib collection per depth row); 50,000 hung."""
    n = 3000
    copy_with(NSYS, tmp_path / "t.sqlite")
    with sqlite3.connect(tmp_path / "t.sqlite") as con:
        tid, s0, e0 = con.execute("SELECT globalTid, start, end FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 1").fetchone()
        con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                        [(s0 - n + i, e0 + n - i, f"level{i}", tid) for i in range(n)])
    cpu = time.process_time()
    code, out, err = _run(["plot", "stream-timeline", str(tmp_path / "t.sqlite"), "-o", str(tmp_path / "t.png")], capsys)
    assert code == 0, err
    assert time.process_time() - cpu < 30  # about 4 s of CPU on a loaded 2-core machine


FORMAT_NAMES = ["e\u202efdp.exe", "zero\u200bwidth", "tag\U000e0041", "soft\u00adhyphen", "iso\u2066late", "nul\x00", "esc\x1b[2J"]
INVISIBLE = "\u202e\u200b\U000e0041\u00ad\u2066\x00\x1b"


def test_format_characters_are_escaped_on_terminals_and_in_pages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Zero-width, tag and isolate characters reached the terminal raw; the HTML report kept U+202E
    (which reverses what a browser shows), NUL and ESC."""
    assert [shown(n) for n in FORMAT_NAMES] == ["e\\u202efdp.exe", "zero\\u200bwidth", "tag\\U000e0041", "soft\\u00adhyphen",
                                                "iso\\u2066late", "nul\\x00", "esc\\x1b[2J"]
    rep = Report("r")
    rep.add_table("t", ["kernel"], [[n] for n in FORMAT_NAMES])
    rep.add_text("x", "\n".join(FORMAT_NAMES))
    page = rep.render()
    assert not any(c in page for c in INVISIBLE) and "e\\u202efdp.exe" in page
    code, _, err = _run(["trace", "analyze", str(tmp_path / "a\u202e\u200b\U000e0041.sqlite")], capsys)
    assert code == 6 and not any(c in err for c in INVISIBLE) and "a\\u202e\\u200b\\U000e0041.sqlite" in err


@pytest.mark.parametrize("kind", ["socket", "fifo", "loop"])
def test_a_process_trace_that_is_not_a_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """A socket (or FIFO, or a looping symlink) in place of procs/X.sqlite was 'no trace (exited)'."""
    run = tmp_path / "run"
    shutil.copytree(JOB, run)
    trace = run / "procs" / "vm-2580-r0.sqlite"
    trace.unlink()
    held = None
    if kind == "socket":
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(trace))
    elif kind == "fifo":
        os.mkfifo(trace)
    else:
        trace.symlink_to(trace.name)
    try:
        code, out, err = _run(["trace", "analyze", str(run)], capsys)
    finally:
        if held is not None:
            held.close()
    words = {"socket": "is a socket, not a process trace", "fifo": "is a FIFO, not a process trace",
             "loop": "Too many levels of symbolic links"}[kind]
    assert code == 6 and words in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [["kernels", "config", "--shape", "\u00b2x4"], ["run", "linear_backward", "--shape", "\u00b2x4"],
                                  ["kernels", "config", "--shape", "99999999999x99999999999"]])
def test_shapes_take_ascii_digits_within_a_bound(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """str.isdigit accepts '\u00b2', which int() refuses (exit 70); a 10^11-row shape printed 3.9e19 tiles."""
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and "shape" in err and err.count("\n") == 1


def test_a_sarif_location_with_a_non_ascii_digit_line_is_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A sanitizer XML whose <line> is '\u00b2' crashed the SARIF writer (exit 70)."""
    src = DATA / "sanitizer" / "unfiltered-1024" / "memcheck-planted_oob"
    xml = src.with_suffix(".xml").read_text()
    assert "<line>" in xml
    (tmp_path / "m.xml").write_text(__import__("re").sub(r"<line>\d+</line>", "<line>\u00b2</line>", xml))
    shutil.copy(src.with_suffix(".log"), tmp_path / "m.log")
    code, _, err = _run(["sanitize", "import", str(tmp_path / "m.xml"), "--sarif", str(tmp_path / "s.sarif")], capsys)
    assert code == 1 and "internal error" not in err and (tmp_path / "s.sarif").is_file()


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_regression_gate_that_could_never_trip_is_refused(capsys: pytest.CaptureFixture[str], value: str) -> None:
    """--fail-on-regression nan was accepted: no slowdown compares above NaN, so the CI gate passed everything."""
    code, out, err = _run(["diff", str(CTD), str(CTD), "--fail-on-regression", value], capsys)
    assert code == 2 and out == "" and "finite percentage" in err


def test_a_store_with_trials_of_no_cell_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trials moved to a cell id the store does not hold vanished from the report ('no trials', exit 0)."""
    from tracer.campaign.trials_db import Store

    _store(tmp_path / "s.sqlite")
    store = Store.open(tmp_path / "s.sqlite")
    cell = store.cells()[0].cell_id
    store.con.execute("INSERT INTO trials (cell_id, trial, failed, crashed, gpu) VALUES (?, 0, 1, 0, 'cpu')", (cell,))
    store.close()
    assert _run(["campaign", "report", str(tmp_path / "s.sqlite")], capsys)[0] == 0
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        con.execute("UPDATE trials SET cell_id = 999")
    code, out, err = _run(["campaign", "report", str(tmp_path / "s.sqlite")], capsys)
    assert code == 6 and out == "" and "1 trial(s) of no cell it names" in err


@pytest.mark.parametrize("key", ["stream", "device"])
def test_a_kineto_gpu_operation_without_its_stream_or_device_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                        key: str) -> None:
    """Kernels without args.stream all landed on 'stream -1' and were judged by stream order (exit 0)."""
    import json

    events = []
    for i in range(2):
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 + 30 * i, "dur": 5,
                    "args": {"correlation": i + 1}},
                   {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7 + i, "ts": 20 + 30 * i, "dur": 10,
                    "args": {"device": 0, "stream": 7 + 6 * i, "correlation": i + 1}}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    code, out, _ = _run(["trace", "analyze", str(tmp_path / "t.json"), "--fail-on-unordered"], capsys)
    assert code == 1 and "UNORDERED" in out  # two streams, no sync: the intact trace has its unordered pair
    for e in events[1::2]:
        del e["args"][key]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    code, out, err = _run(["trace", "analyze", str(tmp_path / "t.json"), "--fail-on-unordered"], capsys)
    assert code == 6 and f"'{key}' is None (allowed: an integer)" in err


def test_a_text_log_beside_the_xml_that_is_a_fifo_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO m.log beside m.xml was read as 'no text output' (verdict no-errors-recorded)."""
    shutil.copy(DATA / "sanitizer" / "unfiltered-1024" / "memcheck-clean.xml", tmp_path / "m.xml")
    os.mkfifo(tmp_path / "m.log")
    code, out, err = _run(["sanitize", "import", str(tmp_path / "m.xml")], capsys)
    assert code == 6 and "m.log is a FIFO" in err
