"""Messages that must say what is true: a kernel with a parameter list in compute-sanitizer's text
keeps its whole name (`race_kernel(float *)`, not `*)`); numeric options have ranges and say
them (`kernels config --sms 1000000000000`); an Nsight Compute CSV with an over-long cell or a
launch id of inf or 1e999 is one line naming the row."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.cli import main
from tracer.errors import TraceFormatError
from tracer.ncu.csvraw import CELL_LIMIT, parse_raw_csv, read_csv
from tracer.sanitize.parse_text import parse_text

SAN = DATA / "sanitizer" / "unfiltered-1024"
RAW = DATA / "ncu" / "cast_transpose_1024.raw.csv"
NAMES = ["race_kernel(float *)", "void k<int, 2>(float const*, int)", "ns::k(float *, int *)", "k(unsigned long long)"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("log, tool", [("racecheck-analysis-planted_race.log", "racecheck"), ("memcheck-planted_oob.log", "memcheck")])
def test_a_kernel_with_a_parameter_list_keeps_its_name(tmp_path: Path, name: str, log: str, tool: str) -> None:
    src = (SAN / log).read_text()
    assert "at cast_transpose+0x" in src
    path = tmp_path / log
    path.write_text(src.replace("at cast_transpose+0x", f"at {name}+0x"))
    before = {f.kernel for f in parse_text(SAN / log, tool).findings}
    assert "cast_transpose" in before
    kernels = {f.kernel for f in parse_text(path, tool).findings}
    assert kernels == {name if k == "cast_transpose" else k for k in before}, kernels


@pytest.mark.parametrize("argv, allowed", [
    (["kernels", "config", "--shape", "4096x4096", "--sms", "1000000000000"], "1 to 1024"),
    (["kernels", "config", "--shape", "4096x4096", "--sms", "0"], "1 to 1024"),
    (["sanitize", "--jobs", "100000", "--", "true"], "1 to 64"),
    (["sanitize", "--print-limit", "-1", "--", "true"], "0 to 10,000,000"),
    (["sanitize", "--timeout", "1e300", "--", "true"], "at most 2,592,000"),
    (["trace", "run", "--timeout", "99999999999", "--", "true"], "at most 2,592,000"),
])
def test_numeric_options_have_ranges_and_name_them(argv: list[str], allowed: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and allowed in err and err.count("\n") == 1, err


def test_an_sm_count_inside_the_range_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", "config", "--shape", "4096x4096", "--sms", "1024"]) == 0
    assert "on 1024 SMs" in capsys.readouterr().out


def _csv_with(tmp_path: Path, row: int, column: str, value: str) -> Path:
    import csv
    import io

    rows = list(csv.reader(io.StringIO(RAW.read_text(encoding="utf-8-sig"))))
    rows[row][rows[0].index(column)] = value
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path = tmp_path / "r.csv"
    path.write_text(out.getvalue())
    return path


@pytest.mark.parametrize("value", ["inf", "1e999", "-1", "nan", "2.5", "1e300", "", "abc"])
def test_a_launch_id_that_is_not_a_launch_number_is_named(tmp_path: Path, value: str) -> None:
    path = _csv_with(tmp_path, 2, "ID", value)
    with pytest.raises(TraceFormatError, match=r"row 3: launch ID .* is not a number from 0 to 9,007,199,254,740,991"):
        read_csv(path)


def test_an_ncu_cell_over_the_csv_default_is_read_and_one_over_the_limit_is_one_line(tmp_path: Path) -> None:
    long_name = "void k<" + "A" * 200_000 + ">()"  # past csv's default field limit of 131,072
    launches, _ = parse_raw_csv(_csv_with(tmp_path, 2, "Kernel Name", long_name).read_text())
    assert launches[0].name == long_name
    with pytest.raises(TraceFormatError, match=f"at most {CELL_LIMIT:,} characters"):
        read_csv(_csv_with(tmp_path, 2, "Kernel Name", "x" * (CELL_LIMIT + 1)))


def test_huge_grid_sizes_are_one_line(tmp_path: Path) -> None:
    path = _csv_with(tmp_path, 2, "Grid Size", f"({'9' * 400}, 1, 1)")
    assert math.isinf(float("9" * 400))
    with pytest.raises(TraceFormatError, match="out of range"):
        read_csv(path)


def test_an_ncu_import_of_a_hostile_csv_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv_with(tmp_path, 2, "ID", "1e999")
    code = main(["profile", "import", str(path), "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 6 and "launch ID" in err and err.count("\n") == 1, err
