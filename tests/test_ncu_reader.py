"""The report reader on real Nsight Compute output captured on an H200 (tests/data/ncu, made by ncu
2025.3.1; see its README): the .ncu-rep through ncu-report and its CSV export give the same numbers,
a report from another ncu version than the reader is read and says so, bad files are one-line errors."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.errors import ToolMissingError, TraceFormatError
from tracer.ncu import pri
from tracer.ncu.container import inspect
from tracer.ncu.reader import csv_beside, read_report
from tracer.ncu.records import Launch, NcuReport, Source

NCU = DATA / "ncu"
REPORTS = ["cast_transpose_1024", "triton_prog"]


def fixture(name: str) -> Path:
    path = NCU / name
    if not path.is_file():
        pytest.skip(f"{path} not captured yet (scripts/capture_ncu.py on a GPU machine)")
    return path


def needs_reader() -> None:
    if pri.load_module() is None:
        pytest.skip("the ncu-report package is not installed (pip install ncu-report)")


def test_cast_transpose_report_reads_into_launch_records() -> None:
    needs_reader()
    rep = read_report(fixture("cast_transpose_1024.ncu-rep"))
    assert rep.source is Source.NCU_REPORT and len(rep.launches) == 2
    a = rep.launches[0]
    assert (a.name, a.grid, a.block, a.cc, a.sms) == ("cast_transpose", (256, 1, 1), (256, 1, 1), "9.0", 132)
    assert a.duration_ns == 3936.0 and a.dram_pct == pytest.approx(11.2056, abs=1e-4)
    assert a.l2_pct == pytest.approx(30.6995, abs=1e-4) and a.occupancy_pct == pytest.approx(23.5186, abs=1e-4)
    assert a.cycles_per_issue == pytest.approx(10.4211, abs=1e-4)
    # the default sections of that capture did not ask for issued IPC: unknown, and said so
    assert a.ipc is None and a.missing == ("sm__inst_issued.avg.per_cycle_active",)
    shares = a.shares()
    assert len(a.stalls) == 19 and sum(shares.values()) == pytest.approx(1.0)
    assert shares["membar"] == 0.0 and max(shares, key=shares.__getitem__) == "long_scoreboard"
    assert rep.clock_control == "none"  # from the ncu command line stored in the report


@pytest.mark.parametrize("name", REPORTS)
def test_report_and_its_csv_export_give_the_same_numbers(name: str) -> None:
    needs_reader()
    rep = read_report(fixture(f"{name}.ncu-rep"))
    exp = read_report(fixture(f"{name}.raw.csv"))
    assert exp.source is Source.CSV and len(rep.launches) == len(exp.launches) >= 2
    for a, b in zip(rep.launches, exp.launches):
        assert (a.id, a.name, a.grid, a.block, a.cc, a.sms, a.missing) == (b.id, b.name, b.grid, b.block, b.cc, b.sms, b.missing)
        for field in ("duration_ns", "dram_pct", "l2_pct", "occupancy_pct", "cycles_per_issue"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-6), field  # the CSV prints 6 decimals
        assert dict(a.stalls) == pytest.approx(dict(b.stalls), rel=1e-5, abs=1e-6)


def test_a_report_from_another_ncu_version_is_read_and_says_so() -> None:
    needs_reader()
    rep = read_report(fixture("triton_prog.ncu-rep"))
    assert rep.ncu_version == "2025.3.1.0 (build 36398880)"
    assert rep.reader_version and not rep.ncu_version.startswith(rep.reader_version)  # the reader is another release
    assert f"made by ncu {rep.ncu_version}, read by ncu-report {rep.reader_version}" in rep.notes
    assert [x.name for x in rep.launches] == ["axpy"] * 3 and rep.launches[0].duration_ns == 44768.0


def test_without_the_reader_the_csv_beside_the_report_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for suffix in (".ncu-rep", ".raw.csv"):
        shutil.copyfile(fixture("cast_transpose_1024" + suffix), tmp_path / ("ct" + suffix))
    monkeypatch.setattr(pri, "load_module", lambda: None)
    rep = read_report(tmp_path / "ct.ncu-rep")
    assert rep.source is Source.CSV and rep.ncu_version == "2025.3.1.0 (build 36398880)" and rep.clock_control == "none"
    assert rep.launches[1].duration_ns == 4000.0 and not rep.nvtx_known
    assert any("ncu-report is not installed" in n for n in rep.notes)
    (tmp_path / "ct.raw.csv").unlink()
    with pytest.raises(ToolMissingError, match=r"pip install ncu-report .* ncu --import ct.ncu-rep --csv --page raw > ct.raw.csv"):
        read_report(tmp_path / "ct.ncu-rep")


@pytest.mark.parametrize("name", ["triton_prog.ncu-rep", "variants/none.ncu-rep"])  # plain ncu; `tracer profile`
@pytest.mark.parametrize("cut", [7, 100, 100_000, 200_000, -1])
def test_a_truncated_report_is_a_one_line_error(tmp_path: Path, cut: int, name: str) -> None:
    data = fixture(name).read_bytes()
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(data[:cut])
    # NVIDIA's reader returns the results before the cut without a word: the framing check must catch it
    with pytest.raises(TraceFormatError, match="cut.ncu-rep: (truncated|.*too short)") as err:
        read_report(bad)
    assert "\n" not in str(err.value)


def test_files_that_are_not_reports(tmp_path: Path) -> None:
    (tmp_path / "x.ncu-rep").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    (tmp_path / "x.txt").write_text("hi")
    for path, message in ((tmp_path / "x.ncu-rep", "not an Nsight Compute report"), (tmp_path / "x.txt", "unknown report type"),
                          (tmp_path / "none.ncu-rep", "no such file")):
        with pytest.raises(TraceFormatError, match=message):
            read_report(path)


def test_container_facts_and_csv_name() -> None:
    facts = inspect(fixture("cast_transpose_1024.ncu-rep"))
    assert facts.ncu_version == "2025.3.1.0 (build 36398880)" and facts.clock_control == "none"
    assert facts.command_line and "--section WarpStateStats" in facts.command_line and facts.command_line.endswith("1024x1024")
    assert csv_beside(Path("runs/x/none.ncu-rep")) == Path("runs/x/none.raw.csv")


def test_records_survive_json() -> None:
    rep = read_report(fixture("triton_prog.raw.csv"))
    again = NcuReport.from_json(rep.to_json())
    assert again == rep and isinstance(again.launches[0], Launch)
