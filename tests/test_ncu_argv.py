"""ncu's command line (exact argv), tracer's NVTX range names in ncu's filter syntax, and ncu's
failure messages turned into causes."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.errors import ToolMissingError, UsageError
from tracer.ncu.argv import (CacheControl, ClockControl, NcuOptions, build_argv, export_csv_argv, kernel_regex,
                             nvtx_range_include, parse_enum, parse_sections)
from tracer.ncu.runner import Failure, check_outcome, classify

DEFAULT = ["--section", "SpeedOfLight", "--section", "MemoryWorkloadAnalysis", "--section", "WarpStateStats",
           "--section", "Occupancy", "--section", "LaunchStats"]


def test_argv_is_built_exactly() -> None:
    opts = NcuOptions(report_stem=Path("/r/none"), kernel=kernel_regex("^(cast_transpose)$"), launch_skip=2, launch_count=4,
                      nvtx_include=(nvtx_range_include("step0/layer0/mb0/cast_transpose"),))
    assert build_argv("ncu", opts, ["python", "-m", "tracer", "run", "x"]) == [
        "ncu", "--target-processes", "all", "--clock-control", "none", "--cache-control", "all", "--nvtx", *DEFAULT,
        "--metrics", "sm__inst_issued.avg.per_cycle_active", "--kernel-name", "regex:^(cast_transpose)$",
        "--nvtx-include", "tracer@step0\\/layer0\\/mb0\\/cast_transpose/", "--launch-skip", "2", "--launch-count", "4",
        "--force-overwrite", "--export", "/r/none", "python", "-m", "tracer", "run", "x"]
    bare = NcuOptions(report_stem=Path("o"), sections=(), metrics=(), clock_control=ClockControl.BASE, cache_control=CacheControl.NONE)
    assert build_argv("/bin/ncu", bare, ["./a.out"]) == [
        "/bin/ncu", "--target-processes", "all", "--clock-control", "base", "--cache-control", "none", "--nvtx",
        "--force-overwrite", "--export", "o", "./a.out"]
    assert export_csv_argv("ncu", Path("r/none.ncu-rep")) == ["ncu", "--import", "r/none.ncu-rep", "--csv", "--page", "raw"]


def test_sections_and_choices() -> None:
    assert parse_sections([], False) == ("SpeedOfLight", "MemoryWorkloadAnalysis", "WarpStateStats", "Occupancy", "LaunchStats")
    assert parse_sections(["SchedulerStats", "Occupancy"], True)[-2:] == ("SchedulerStats", "SourceCounters")
    with pytest.raises(UsageError, match="unknown section 'SpeedOfLite' \\(allowed: ComputeWorkloadAnalysis"):
        parse_sections(["SpeedOfLite"], False)
    with pytest.raises(UsageError, match="unknown clock control 'locked' \\(allowed: none, base\\)"):
        parse_enum("clock control", "locked", ClockControl)
    with pytest.raises(UsageError, match="--kernel '\\(' is not a regular expression"):
        kernel_regex("(")
    assert nvtx_range_include("a[1]*b") == "tracer@a\\[1\\]\\*b/"


@pytest.mark.parametrize("text,cause", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the "
     "target device 0.", Failure.COUNTER_PERMISSION),
    ("==PROF== Connected to process 12\n==ERROR== Failed to initialize the profiler: LibraryNotLoaded", Failure.PROFILER_UNAVAILABLE),
    ("==PROF== Connected to process 640\n==PROF== Disconnected from process 640\n==WARNING== No kernels were profiled.",
     Failure.NO_KERNELS),
    ((DATA / "ncu" / "ncu_ct.log").read_text(), None),  # a good run, captured
])
def test_ncu_messages_name_their_cause(text: str, cause: Failure | None) -> None:
    assert classify(text) is cause


def test_failures_become_one_line_errors(tmp_path: Path) -> None:
    opts = NcuOptions(report_stem=tmp_path / "r", kernel="regex:nope", nvtx_include=("tracer@x/",))
    report = tmp_path / "r.ncu-rep"
    with pytest.raises(ToolMissingError, match=r"ERR_NVGPUCTRPERM\); run as root"):
        check_outcome("==ERROR== ERR_NVGPUCTRPERM - ...", 1, report, opts, lambda: [])
    with pytest.raises(ToolMissingError, match="virtualised GPU or in a gVisor sandbox"):
        check_outcome("==ERROR== Failed to initialize the profiler: LibraryNotLoaded", 1, report, opts, lambda: [])
    with pytest.raises(UsageError, match=r"no kernel launch matched --kernel-name regex:nope, --nvtx-include tracer@x/ "
                                         r"\(exit 0\); the kernels that ran: axpy, gemm"):
        check_outcome("==WARNING== No kernels were profiled.", 0, report, opts, lambda: ["axpy", "gemm"])
    with pytest.raises(UsageError, match="could not be listed"):
        check_outcome("==WARNING== No kernels were profiled.", 0, report, opts, lambda: None)
    with pytest.raises(ToolMissingError, match=r"ncu wrote no report \(exit 9\): ==ERROR== The application returned an error code \(9\)"):
        check_outcome("==PROF== x\n==ERROR== The application returned an error code (9).\n", 9, report, opts, lambda: [])
    report.write_bytes(b"x")
    check_outcome("==PROF== Report: r.ncu-rep", 0, report, opts, lambda: [])  # written: no error
