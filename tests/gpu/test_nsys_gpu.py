"""On a GPU where nsys writes reports (a full Nsight Systems, or the nsys inside Nsight Compute with
the elfutils libraries tracer prepares from drgn): `trace run --backend nsys` end to end on a
foreign torch program (two streams joined by CUDA events, NVTX ranges), an NVTX capture range, two
processes on one GPU in one report, and `trace import` of the .nsys-rep it wrote. Skipped, with
the reason, where nsys cannot write reports."""
from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_tables import PROGRAMS
from tests.test_schemas import assert_valid
from tracer.cli import main
from tracer.errors import ToolMissingError

pytestmark = pytest.mark.gpu
TRAIN = [sys.executable, str(PROGRAMS / "nsys_train.py")]


@pytest.fixture(scope="module", autouse=True)
def writer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """An nsys that writes reports, its library folder (if it needs one) prepared in a cache of
    this module's own: a prepared folder in the real cache would turn other tests' `--backend
    auto` into nsys."""
    from tracer.capture.nsys import find_writer

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        try:
            find_writer(prepare=True)
        except ToolMissingError as exc:
            pytest.skip(f"nsys cannot write reports here: {exc}")
        yield


def rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def range_names(db: Path) -> set[str]:
    return {r[0] for r in rows(db, "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                                   "WHERE e.eventType IN (59, 60)")}


@pytest.fixture(scope="module")
def train_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("nsys") / "train"
    code = main(["trace", "run", "--backend", "nsys", "--cuda-event-trace", "--pairs", "all", "-o", str(run), "--", *TRAIN])
    assert code == 0
    return run


def test_foreign_program_end_to_end(train_run: Path) -> None:
    verdict = json.loads((train_run / "verdict.json").read_text())
    command = json.loads((train_run / "command.json").read_text())
    assert command["backend"] == "nsys" and command["exit"] == 0 and (train_run / "trace.nsys-rep").is_file()
    assert_valid("command", command)
    assert_valid("verdict", verdict)
    assert verdict["producer"].startswith("nsys 2025.") and verdict["kernels"] >= 40
    # only copies run outside every range (the weights' HtoD, the loss's DtoH; tests/test_nsys_fixtures.py
    # checks every kernel is in its range on this program's capture)
    assert len(verdict["streams"]) == 2 and verdict["unattributed"] <= verdict["operations"]["memcpy"]
    assert verdict["event_records"] >= 4 and verdict["event_edges"] >= 4 and verdict["unmatched_waits"] == 0
    assert {"step0", "step3", "prepare", "forward", "backward", "optimizer", "profile"} <= range_names(train_run / "trace.sqlite")
    assert verdict["hazards"] == {"memory": False, "note": verdict["hazards"]["note"]}
    assert "Nsight Systems capture has no memory access sets" in verdict["hazards"]["note"]


def test_capture_range_keeps_only_the_range(tmp_path: Path, train_run: Path) -> None:
    run = tmp_path / "range"
    assert main(["trace", "run", "--backend", "nsys", "--capture-range", "profile", "-o", str(run), "--", *TRAIN]) == 0
    whole = json.loads((train_run / "verdict.json").read_text())["kernels"]
    ranged = json.loads((run / "verdict.json").read_text())["kernels"]
    assert 0 < ranged < whole
    assert "step0" not in range_names(run / "trace.sqlite") and "step1" in range_names(run / "trace.sqlite")


def test_two_processes_on_one_gpu_in_one_report(tmp_path: Path) -> None:
    run = tmp_path / "two"
    argv = ["trace", "run", "--backend", "nsys", "-o", str(run), "--", sys.executable, str(PROGRAMS / "nsys_two_procs.py")]
    assert main(argv) == 0
    per_pid = rows(run / "trace.sqlite", "SELECT globalPid, count(*), count(DISTINCT streamId) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                         "GROUP BY globalPid")
    assert len(per_pid) == 2 and all(n >= 8 for _, n, _ in per_pid)


def test_import_of_the_report(tmp_path: Path, train_run: Path) -> None:
    rep = tmp_path / "copy.nsys-rep"
    shutil.copyfile(train_run / "trace.nsys-rep", rep)
    assert main(["trace", "import", str(rep), "-o", str(tmp_path / "imported"), "--pairs", "all"]) == 0
    imported = json.loads((tmp_path / "imported" / "verdict.json").read_text())
    assert imported["kernels"] == json.loads((train_run / "verdict.json").read_text())["kernels"]


def test_doctor_names_the_writer() -> None:
    from tracer.doctor import run_checks

    check = run_checks().get("nsys can write reports")
    assert check.found and "QdstrmImporter" in check.version
