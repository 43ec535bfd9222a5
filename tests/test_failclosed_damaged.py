"""Damaged input never reads as "nothing to report": each case is a copy of a real capture, export,
profile or store with one thing broken, which once gave 0 pairs, 0 UNORDERED, 0 hazards or a
nonsense failure rate with exit 0, and is now one line and a non-zero exit."""
from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.trace_synthetic import copy_with
from tracer.cli import main
from tracer.workloads.profiles import load_yaml
from tracer.errors import ProfileError
from tracer.sanitize.suppress import load_rules

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "fixtures"
CAPTURE = DATA / "traces" / "planted_cross_stream.sqlite"
MEMORY = DATA / "hazards" / "raw_no_wait.sqlite"


def _copy(src: Path, tmp: Path, *sql: str) -> Path:
    return copy_with(src, tmp / src.name, *sql)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_the_intact_capture_has_unordered_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _run(["trace", "analyze", str(CAPTURE), "--fail-on-unordered"], capsys)
    assert code == 1


def test_kernels_sharing_one_correlation_id_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _copy(CAPTURE, tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = 1")
    code, err = _run(["trace", "analyze", str(bad), "--fail-on-unordered"], capsys)
    assert code == 6 and "share a correlationId" in err and err.count("\n") == 1


def test_graph_replays_may_share_a_correlation_id(tmp_path: Path) -> None:
    from tracer.readers.load import load_trace
    t = load_trace(DATA / "hazards" / "graph_no_wait.sqlite")  # CUDA graph replays: real shared ids
    assert len(t.kernels.corr) > len(set(t.kernels.corr.tolist()))


@pytest.mark.parametrize("src", [SHARED / "nsys" / "torch_small.sqlite", SHARED / "nsys" / "h100_2gpu_1s.sqlite"],
                         ids=lambda p: p.name)
def test_an_emptied_kernel_table_of_an_nsys_export_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], src: Path) -> None:
    bad = _copy(src, tmp_path, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    code, err = _run(["trace", "analyze", str(bad), "--fail-on-unordered"], capsys)
    assert code == 6 and "has no rows" in err


def test_a_tracer_capture_without_kernels_fails_any_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _copy(CAPTURE, tmp_path, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    code, err = _run(["trace", "analyze", str(bad), "--fail-on-unordered"], capsys)
    assert code == 1 and "no kernel" in err
    code, _ = _run(["trace", "analyze", str(bad)], capsys)
    assert code == 0  # read and described; only a check cannot pass on it


def test_a_kineto_trace_with_a_second_trace_events_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = gzip.decompress((SHARED / "kineto" / "event_sync.json.gz").read_bytes()).decode()
    body = text[text.index("{") + 1:]
    bad = tmp_path / "dup.json"
    bad.write_text('{"traceEvents": [],' + body)
    code, err = _run(["trace", "analyze", str(bad), "--fail-on-unordered"], capsys)
    assert code == 6 and "'traceEvents' twice" in err
    event = tmp_path / "dup_event.json"
    event.write_text(text.replace('"ph": "X"', '"ph": "X", "ph": "i"', 1))
    assert text.count('"ph": "X"') and event.read_text() != text
    code, err = _run(["trace", "analyze", str(event)], capsys)
    assert code == 6 and "duplicate JSON key 'ph'" in err and "truncated" not in err


def test_a_duplicate_yaml_key_names_key_and_line(tmp_path: Path) -> None:
    src = (ROOT / "profiles" / "suppressions" / "default.yaml").read_text()
    assert load_rules(ROOT / "profiles" / "suppressions" / "default.yaml")
    bad = tmp_path / "s.yaml"
    line = next(i for i, x in enumerate(src.splitlines()) if x.strip().startswith("kernel: \"nvjet_*\""))
    lines = src.splitlines()
    lines.insert(line + 1, '    kernel: "*"')  # would widen the rule to every kernel
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ProfileError, match=rf"line {line + 2}: key 'kernel' repeats the key of line {line + 1}"):
        load_rules(bad)
    flow = tmp_path / "f.yaml"
    flow.write_text("{schema: 1, schema: 2}\n")
    with pytest.raises(ProfileError, match="key 'schema' repeats"):
        load_yaml(flow)


def test_a_campaign_profile_with_a_duplicate_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("schema: 1\nname: t\nworkload: cpu_reference\nvariants: [none]\ntrials_per_cell: 2\ntrials_per_cell: 9\n")
    code, err = _run(["campaign", "run", str(p), "-o", str(tmp_path / "s.sqlite"), "--no-progress"], capsys)
    assert code == 2 and "trials_per_cell" in err and "line 6" in err
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("sql", ["DROP TABLE TRACER_MEMORY_ACCESS", "DROP TABLE TRACER_OPS",
                                 "UPDATE TRACER_MEMORY_ACCESS SET opId = opId + 1000000000"],
                         ids=["no-access-table", "no-ops-table", "accesses-of-no-op"])
def test_memory_sets_that_lost_their_accesses_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str) -> None:
    intact, _ = _run(["trace", "analyze", str(MEMORY), "--fail-on-hazard"], capsys)
    bad = _copy(MEMORY, tmp_path, sql)
    code, err = _run(["trace", "analyze", str(bad), "--fail-on-hazard"], capsys)
    assert intact == 1 and code == 6 and err.count("\n") == 1, err


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("store")
    p = tmp / "c.yaml"
    p.write_text(json.dumps({"schema": 1, "name": "t", "workload": "cpu_reference", "variants": ["none"],
                             "trials_per_cell": 4, "batch": 2, "executor": {"tasks": 1}}))
    assert main(["campaign", "run", str(p), "-o", str(tmp / "s.sqlite"), "--no-progress"]) in (0, 1)
    return tmp / "s.sqlite"


@pytest.mark.parametrize("value", ["'x'", "-1", "7", "0.5"])
def test_a_store_whose_failed_flags_are_not_0_or_1_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              store: Path, value: str) -> None:
    assert main(["campaign", "report", str(store)]) == 0
    capsys.readouterr()
    bad = _copy(store, tmp_path, f"UPDATE trials SET failed = {value} WHERE trial = 0")
    code, err = _run(["campaign", "report", str(bad)], capsys)
    assert code == 6 and "not 0 or 1" in err and "trial 0" in err


def test_a_time_before_the_session_start_is_refused_naming_the_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No Nsight Systems export we know holds a negative time (nsys-ai's file with a runtime call at
    -3,000 ns was written by hand): refused, with the correlation id of the row that has it."""
    con = sqlite3.connect(CAPTURE)
    corr = con.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start LIMIT 1").fetchone()[0]
    con.close()
    bad = _copy(CAPTURE, tmp_path, f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = -3000, end = -500 WHERE correlationId = {corr}")
    code, err = _run(["trace", "analyze", str(bad)], capsys)
    assert code == 6 and f"correlationId {corr}, start -3000" in err and "before the session start" in err
