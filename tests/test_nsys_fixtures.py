"""Nsight Systems captures made on the H200 by `tracer trace run --backend nsys` (nsys 2025.3.1
from Nsight Compute's folder, elfutils from drgn; tests/data/nsys, scripts/capture_nsys_fixtures.py),
read and judged here with no GPU and no nsys: kernel counts as captured, NVTX ranges and their
attribution, ordering verdicts, a capture range, two processes in one export, and a hazards
verdict that says an nsys capture cannot judge hazards."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tracer.cli import main
from tracer.analysis.hazards import NSYS_NOTE
from tracer.readers.load import load_trace

DATA = Path(__file__).resolve().parent / "data" / "nsys"
CAPTURES = json.loads((DATA / "captures.json").read_text())
FIXTURES = sorted(name for name in CAPTURES if (DATA / f"{name}.sqlite").is_file() and not name.startswith("cupti_"))
SEED_PAIRS = ["--pairs", "*/cast_transpose:*/dgrad"]  # the seed profiles' pairs
TRAIN_RANGES = {"step0", "step1", "step2", "step3", "prepare", "forward", "backward", "optimizer", "profile"}


def verdict(capsys: pytest.CaptureFixture[str], name: str, *options: str, code: int = 0) -> dict:
    """The verdict JSON of `trace analyze`, with what it printed on stderr under "stderr"."""
    assert main(["trace", "analyze", str(DATA / f"{name}.sqlite"), "--json", *options]) == code
    out = capsys.readouterr()
    return json.loads(out.out) | {"stderr": out.err}


def rows(name: str, sql: str) -> list[tuple]:
    con = sqlite3.connect(DATA / f"{name}.sqlite")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def range_names(name: str) -> set[str]:
    return {r[0] for r in rows(name, "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e "
                                     "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (59, 60)")}


def test_the_fixtures_are_there_and_small() -> None:
    assert len(FIXTURES) >= 6
    assert all((DATA / f"{n}.sqlite").stat().st_size < 2_000_000 for n in CAPTURES if (DATA / f"{n}.sqlite").is_file())


@pytest.mark.parametrize("name", FIXTURES)
def test_each_capture_reads_with_the_kernels_it_was_captured_with(name: str) -> None:
    trace = load_trace(DATA / f"{name}.sqlite")
    assert trace.producer == f"nsys {CAPTURES[name]['nsys']} schema {CAPTURES[name]['schema']}"
    assert trace.producer.startswith("nsys 2025.3")
    assert len(trace.kernels) == CAPTURES[name]["kernels"] > 0  # counted with SQL when it was captured
    assert not trace.record_errors and trace.memory is None


def test_event_ordered_seed_is_ordered_by_its_events(capsys: pytest.CaptureFixture[str]) -> None:
    v = verdict(capsys, "event_ordered_dgrad", *SEED_PAIRS, "--fail-on-unordered")
    assert v["pair_counts"]["event-ordered"] == 2 and v["pair_counts"]["unordered"] == 0
    assert v["event_edges"] == v["event_records"] > 0 and v["unmatched_waits"] == 0
    assert all(p["edge"] and p["producer_stream"] != p["consumer_stream"] for p in v["pairs"])


def test_planted_cross_stream_is_unordered(capsys: pytest.CaptureFixture[str]) -> None:
    v = verdict(capsys, "planted_cross_stream", *SEED_PAIRS, "--fail-on-unordered", code=1)
    assert v["pair_counts"]["unordered"] == 2 and v["pair_counts"]["event-ordered"] == 0
    assert "2 producer -> consumer pair(s) are UNORDERED" in v["stderr"]


def test_the_verdict_says_hazards_cannot_be_judged_from_nsys(capsys: pytest.CaptureFixture[str]) -> None:
    v = verdict(capsys, "planted_cross_stream", *SEED_PAIRS, "--fail-on-hazard", code=1)
    assert v["hazards"] == {"memory": False, "note": NSYS_NOTE}
    assert "hazards cannot be checked: an Nsight Systems capture has no memory access sets" in v["stderr"]


def test_event_records_without_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """nsys 2025.3's --cuda-event-trace defaults to auto: the capture without the flag has the
    same event records and edges as the one with it."""
    with_flag = verdict(capsys, "event_ordered_dgrad", *SEED_PAIRS)
    without = verdict(capsys, "event_ordered_dgrad_no_event_trace", *SEED_PAIRS)
    assert "--cuda-event-trace" not in CAPTURES["event_ordered_dgrad_no_event_trace"]["argv"]
    assert without["event_edges"] == with_flag["event_edges"] > 0
    assert without["pair_counts"] == with_flag["pair_counts"]


def test_foreign_training_program(capsys: pytest.CaptureFixture[str]) -> None:
    v = verdict(capsys, "nsys_train", "--pairs", "all", "--fail-on-unordered")
    assert TRAIN_RANGES <= range_names("nsys_train")
    assert [s["stream"] for s in v["streams"]] == [7, 13]
    a = load_trace(DATA / "nsys_train.sqlite")
    from tracer.analysis.analyze import analyze
    from tracer.analysis.pairs import PairMode, PairSpec

    an = analyze(a, PairSpec(PairMode.ALL), hazards=False)
    outside = an.attribution.range_of_kernel < 0
    assert not (outside & (an.trace.kernels.kinds() == 0)).any()  # every kernel in its NVTX range
    # only copies run outside every range: the weights' HtoD before the first step, the loss's DtoH after it
    assert v["unattributed"] == int(outside.sum()) > 0 and v["operations"]["memcpy"] >= v["unattributed"]
    # backward kernels come from autograd's thread; nsys records no torch ops, so the range comes
    # from the thread that was inside one then, not from the forward op
    assert v["attribution_rules"]["backward-caller"] > 0 and v["attribution_rules"]["forward-op"] == 0
    assert v["event_edges"] == 4 and v["pair_counts"]["event-ordered"] > 0  # one wait per step


def test_capture_range_keeps_the_steps_inside_it(capsys: pytest.CaptureFixture[str]) -> None:
    whole, ranged = verdict(capsys, "nsys_train", "--pairs", "all"), verdict(capsys, "nsys_train_range", "--pairs", "all")
    assert "--capture-range" in CAPTURES["nsys_train_range"]["argv"]
    assert ranged["kernels"] * 4 == whole["kernels"] * 3  # steps 1-3 of 4 identical steps
    assert "step0" not in range_names("nsys_train_range") and TRAIN_RANGES - {"step0"} <= range_names("nsys_train_range")


def test_two_processes_in_one_export_keep_their_pids() -> None:
    """Both processes' kernels are in the export, each under its globalPid; their stream ids are
    the same numbers, so only the process tells their streams apart."""
    per_pid = rows("nsys_two_procs", "SELECT globalPid >> 24, group_concat(DISTINCT streamId), count(*) "
                                     "FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY globalPid ORDER BY globalPid")
    assert len(per_pid) == 2 == CAPTURES["nsys_two_procs"]["processes"]
    (pid_a, streams_a, n_a), (pid_b, streams_b, n_b) = per_pid
    assert pid_a != pid_b and n_a == n_b and n_a + n_b == CAPTURES["nsys_two_procs"]["kernels"]
    assert set(streams_a.split(",")) == set(streams_b.split(",")) and len(streams_a.split(",")) == 2
    ranges = dict(rows("nsys_two_procs", "SELECT e.text, e.globalTid >> 24 FROM NVTX_EVENTS e WHERE e.eventType = 59"))
    assert set(ranges) == {"proc0", "proc1"} and set(ranges.values()) == {pid_a, pid_b}


def test_two_processes_of_one_export_keep_their_own_streams() -> None:
    """Both processes ran on streams 7 and 13 of one GPU: the verdict keys streams by process, so no
    kernel of one process is in stream order with a kernel of the other."""
    from tracer.analysis.analyze import analyze
    from tracer.analysis.pairs import PairMode, PairSpec

    a = analyze(load_trace(DATA / "nsys_two_procs.sqlite"), PairSpec(PairMode.ALL), hazards=False)
    streams = {(s.pid, s.raw_stream) for s in a.streams}
    pids = {pid for pid, _ in streams}
    assert len(pids) == 2 and streams == {(p, r) for p in pids for r in (7, 13)}
    assert a.trace.multi_process and sorted(a.trace.processes) == sorted(pids)
    across = [p for p in a.pairs if a.trace.stream_origin(p.producer_stream).pid != a.trace.stream_origin(p.consumer_stream).pid]
    assert across and all(p.verdict.value != "same-stream" for p in across)
    assert a.to_json()["processes"] == list(a.trace.processes)


def test_import_of_an_nsys_export(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run = tmp_path / "imported"
    assert main(["trace", "import", str(DATA / "nsys_train.sqlite"), "-o", str(run), "--pairs", "all"]) == 0
    saved = json.loads((run / "verdict.json").read_text())
    assert saved["kernels"] == CAPTURES["nsys_train"]["kernels"] and saved["producer"].startswith("nsys 2025.3")
    assert json.loads((run / "command.json").read_text())["backend"] == "import"


@pytest.mark.parametrize("name", ["event_ordered_dgrad", "planted_cross_stream", "nsys_train"])
def test_nsys_and_cupti_captures_of_one_program_agree(capsys: pytest.CaptureFixture[str], name: str) -> None:
    """The same program under both backends (cupti_*: `--backend cupti --memory`, captured in the
    same session): the same kernels, ranges, edges and ordering verdicts; hazards only from CUPTI."""
    pairs = ["--pairs", "all"] if name == "nsys_train" else SEED_PAIRS
    n, c = verdict(capsys, name, *pairs), verdict(capsys, f"cupti_{name}", *pairs)
    assert c["producer"].startswith("tracer-cupti") and n["producer"].startswith("nsys 2025.3")
    for key in ("kernels", "nvtx_ranges", "unattributed", "event_edges", "pair_counts"):
        assert n[key] == c[key], key
    assert [s["kernels"] for s in n["streams"]] == [s["kernels"] for s in c["streams"]]
    mangled = "SELECT m.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds m ON m.id = k.mangledName ORDER BY 1"
    assert rows(name, mangled) == rows(f"cupti_{name}", mangled)  # the demangled names differ in spelling only
    assert c["hazards"]["memory"] is True and n["hazards"] == {"memory": False, "note": NSYS_NOTE}


def test_tracer_names_kernels_as_nsys_does() -> None:
    """The CUPTI backend demangles and shortens kernel names itself: on every kernel of the nsys
    captures its short name is nsys's shortName (templates, lambdas, anonymous namespaces)."""
    from tracer.capture.demangle import demangle, short_name

    pairs = set()
    for name in ("event_ordered_dgrad", "planted_cross_stream", "nsys_train", "nsys_two_procs"):
        pairs |= set(rows(name, "SELECT DISTINCT m.value, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                "JOIN StringIds m ON m.id = k.mangledName JOIN StringIds s ON s.id = k.shortName"))
    assert len(pairs) > 50 and any("(anonymous namespace)" in demangle(m) for m, _ in pairs)
    assert {m: short_name(demangle(m)) for m, _ in pairs} == dict(pairs)
