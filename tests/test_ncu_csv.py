"""The `ncu --csv --page raw` parser: ncu's number formats, the unit row, missing metrics, bad exports.
Real exports captured on an H200 are read in test_ncu_reader.py; the rows here are crafted only to
pin number formats and malformed inputs."""
from __future__ import annotations

import pytest

from tracer.errors import TraceFormatError
from tracer.ncu.csvraw import parse_dim3, parse_number, parse_raw_csv

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","gpu__time_duration.sum","gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",'
        '"smsp__average_warps_issue_stalled_membar_per_issue_active.ratio",'
        '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","launch__sm_count","launch__func_cache_config"\n')
UNITS = '"","","","","","","","","","","","{dur}","%","inst","inst","SM",""\n'
ROW = '"{id}","7","python3.12","127.0.0.1","cast_transpose","1","7","(256, 1, 1)","(1,056, 1, 1)","0","9.0","{dur}","{dram}","{mb}","{wait}","132","CachePreferNone"\n'  # noqa: E501  # one CSV row as ncu prints it


def export(*rows: dict[str, str], dur_unit: str = "us") -> str:
    return HEAD + UNITS.format(dur=dur_unit) + "".join(ROW.format(**r) for r in rows)


@pytest.mark.parametrize("text,value", [
    ("1,980,000", 1980000.0), ("84,926.30", 84926.3), ("3122.000000", 3122.0), ("0.36", 0.36), ("0", 0.0),
    ("1,850", 1850.0),  # ncu groups integers by thousands: never a decimal comma with three digits
    ("0,36", 0.36), ("1.980.000", 1980000.0), ("1.980.000,5", 1980000.5), ("12,5", 12.5),
    ("1 980 000", 1980000.0), ("1\u202f980\u202f000", 1980000.0), ("1'980'000", 1980000.0),
    ("4.0e-05", 4e-05), ("-1,234", -1234.0), ("1.980", 1.98),
    ("n/a", None), ("no data", None), ("", None), ("N/A", None),
])
def test_numbers_as_ncu_prints_them(text: str, value: float | None) -> None:
    assert parse_number(text) == value


def test_text_that_is_no_number_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_number("CachePreferNone")
    assert parse_dim3("(1,056, 1, 1)") == (1056, 1, 1) and parse_dim3("(256, 1, 1)") == (256, 1, 1)
    assert parse_dim3("256") is None


def test_rows_become_launches_with_units_applied() -> None:
    text = export({"id": "0", "dur": "3.936000", "dram": "11.2", "mb": "0.5", "wait": "1.5"},
                  {"id": "1", "dur": "4,000.5", "dram": "n/a", "mb": "0", "wait": "2"})
    launches, notes = parse_raw_csv("==PROF== Connected to process 1\n" + text)
    a, b = launches
    assert (a.id, a.name, a.grid, a.block, a.sms, a.duration_ns) == (0, "cast_transpose", (1056, 1, 1), (256, 1, 1), 132, 3936.0)
    assert a.shares() == {"membar": 0.25, "wait": 0.75} and a.dram_pct == 11.2
    assert b.duration_ns == 4000500.0 and b.dram_pct is None
    assert "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed" in b.missing
    assert "lts__throughput.avg.pct_of_peak_sustained_elapsed" in a.missing and notes == []


def test_duration_units_and_an_unknown_unit() -> None:
    (ns,), _ = parse_raw_csv(export({"id": "0", "dur": "3,936", "dram": "1", "mb": "0", "wait": "1"}, dur_unit="nsecond"))
    (s,), _ = parse_raw_csv(export({"id": "0", "dur": "4.0e-06", "dram": "1", "mb": "0", "wait": "1"}, dur_unit="second"))
    (odd,), _ = parse_raw_csv(export({"id": "0", "dur": "4", "dram": "1", "mb": "0", "wait": "1"}, dur_unit="cycle"))
    assert ns.duration_ns == 3936.0 and s.duration_ns == pytest.approx(4000.0)
    assert odd.duration_ns is None and "gpu__time_duration.sum (unit 'cycle')" in odd.missing


@pytest.mark.parametrize("text,message", [
    ("hello\n", "not an `ncu --csv --page raw` export"),
    ('"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n"0","1","k","S","M","","1"\n',
     "a `--page details` export"),
    (HEAD + ROW.format(id="0", dur="1", dram="1", mb="0", wait="1"), "no unit row"),
    (HEAD + UNITS.format(dur="us"), "no launches"),
    (HEAD + UNITS.format(dur="us") + '"0","7","python3.12","127.0.0.1","cast_transpose","1"\n', "row 3 has 6 cells, the header 17"),
    (HEAD + UNITS.format(dur="us") + ROW.format(id="x", dur="1", dram="1", mb="0", wait="1"), "launch ID 'x' is not a number"),
])
def test_bad_exports_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(TraceFormatError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        parse_raw_csv(text, "x.csv")
    assert "\n" not in str(err.value)
