"""What scripts/capture_ncu.py captured on the H200 through `tracer profile` (tests/data/ncu/variants,
triton, table-4096, table-8192, logs; see its README): a CPU import of the reports through ncu-report,
their CSV exports and the GPU run's own profile.json give the same numbers, NVTX paths name tracer's
ranges, a fence shows up as memory-barrier stalls, and ncu's failures read as tracer says."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.cli import main
from tracer.ncu import pri
from tracer.ncu.compare import LAUNCH_METRICS, Agreement, GroupBy, agreement, compare, compare_runs, groups
from tracer.ncu.csvraw import parse_number
from tracer.ncu.reader import csv_beside, read_report
from tracer.ncu.records import Source
from tracer.ncu.runner import CAUSES, Failure, available_kernels, classify
from tracer.ncu.profile_json import ProfileRun, load_run

NCU = DATA / "ncu"
MADE_BY = "2025.3.1.0 (build 36398880)"
CSV_DIGITS = 5e-7  # the raw CSV prints 6 decimals: half a unit of the last one
GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")  # "1,980,000"


def captured(name: str) -> ProfileRun:
    path = NCU / name / "profile.json"
    if not path.is_file():
        pytest.skip(f"{path.parent} not captured yet (python scripts/capture_ncu.py OUT on a GPU machine, then copy "
                    f"OUT/tests_data_ncu/* into tests/data/ncu/)")
    return load_run(path)


def needs_reader() -> None:
    if pri.load_module() is None:
        pytest.skip("the ncu-report package is not installed (pip install ncu-report)")


def assert_same_numbers(a: Agreement, launches: int) -> None:
    """Equal up to the CSV's printed precision: durations exactly, the rest within its sixth decimal."""
    diff, rel = dict(a.max_absolute), dict(a.max_relative)
    assert a.launches == launches and set(LAUNCH_METRICS) <= set(diff) and len(diff) == len(LAUNCH_METRICS) + 19
    assert diff["duration_ns"] == 0.0 and max(diff.values()) <= CSV_DIGITS, a
    assert max(rel[m] for m in LAUNCH_METRICS) < 1e-5, a


def test_a_cpu_import_gives_the_numbers_of_the_gpu_run(tmp_path: Path) -> None:
    """ncu-report 2026.3 reads what ncu 2025.3.1 wrote: the .ncu-rep (through `tracer profile import`),
    its CSV export and the GPU run's records (read there from the CSV) agree launch by launch."""
    run = captured("variants")
    needs_reader()
    for t in run.targets:
        rep_path = NCU / "variants" / t.report.path
        assert main(["profile", "import", str(rep_path), "-o", str(tmp_path / t.label), "--label", t.label]) == 0
        (imported,) = load_run(tmp_path / t.label).targets
        rep, exported = imported.report, read_report(csv_beside(rep_path))
        assert (rep.source, exported.source, t.report.source) == (Source.NCU_REPORT, Source.CSV, Source.CSV)
        assert rep.ncu_version == t.report.ncu_version == MADE_BY and not MADE_BY.startswith(rep.reader_version or "?")
        assert f"made by ncu {MADE_BY}, read by ncu-report {rep.reader_version}" in rep.notes
        for a in (agreement(rep.launches, t.report.launches), agreement(rep.launches, exported.launches)):
            assert_same_numbers(a, 2)
            assert not a.renamed
        assert max(dict(agreement(exported.launches, t.report.launches).max_absolute).values()) == 0.0


def test_the_torch_triton_program_read_from_its_csv_export_as_on_the_gpu() -> None:
    """Its 20 MB .ncu-rep stays out of the repository (docs/benchmarks.md has its import compared);
    its CSV export read here gives the GPU run's records exactly."""
    run = captured("triton")
    (t,) = run.targets
    exported = read_report(NCU / "triton" / "capture_ncu.raw.csv")
    a = agreement(exported.launches, t.report.launches)
    assert a.launches == 6 and max(dict(a.max_absolute).values()) == 0.0 and not a.renamed
    names = [x.name for x in t.report.launches]
    assert names[0] == names[3] == "axpy_kernel" and names[1].startswith("sm80_xmma_gemm_f32f32")
    assert "softmax_warp_forward" in names[2] and t.report.ncu_version == MADE_BY and not t.report.nvtx_known


def test_other_launches_do_not_agree() -> None:
    run = captured("variants")
    none, fenced = (t.report.launches for t in run.targets[:2])
    a = agreement(none, fenced)  # the same kernels, grids and blocks: only the numbers differ
    assert dict(a.max_absolute)["stall membar"] > 1.0 and dict(a.max_relative)["stall membar"] == 1.0
    from tracer.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match=r"not the same launches \(id, grid, block\): 2 vs 1 launches"):
        agreement(none, none[:1])


def test_numbers_ncu_printed_with_thousands_separators_read_as_ncu_report_reads_them() -> None:
    """The real export groups digits ("1,980,000" kHz of clock rate, "62,914,560" bytes of L2): every
    such cell parses to the value NVIDIA's reader gives for the same metric of the same launch."""
    captured("variants")
    needs_reader()
    mod = pri.load_module()
    rows = list(csv.reader((NCU / "variants" / "none.raw.csv").open()))
    header, body = rows[0], rows[2:]
    ctx = mod.load_report(str(NCU / "variants" / "none.ncu-rep"))  # type: ignore[union-attr]  # needs_reader() skipped the test when the module is missing
    actions = pri._actions(ctx)
    seen = {}
    for row, action in zip(body, actions, strict=True):
        for name, cell in zip(header, row):
            if GROUPED.fullmatch(cell):
                seen[name] = cell
                assert parse_number(cell) == action.metric_by_name(name).value(), (name, cell)
    assert seen["device__attribute_clock_rate"] == "1,980,000" and len(seen) >= 50


def test_variants_carry_nvtx_paths_ipc_and_the_fence_as_membar_stalls() -> None:
    run = captured("variants")
    needs_reader()
    reports = {t.label: read_report(NCU / "variants" / t.report.path) for t in run.targets}
    none = reports["none"].launches
    assert [x.nvtx for x in none] == [("tracer@step0/layer0/mb0/cast_weight",), ("tracer@step0/layer0/mb0/cast_transpose",)]
    assert all(x.ipc is not None and x.ipc > 0 for r in reports.values() for x in r.launches)
    c = compare(groups([run], GroupBy.LABEL), "none", run.clock_control)
    assert c.summary("none").membar_share == 0.0
    assert c.summary("device_before_atomic").membar_share > 0.15 and c.summary("system_before_atomic").membar_share > 0.2
    assert run.clock_control == "none" and reports["none"].clock_control == "none"


@pytest.mark.parametrize("size,floor", [(4096, 10.0), (8192, 5.0)])
def test_the_fence_tables_of_docs_benchmarks(size: int, floor: float) -> None:
    """The runs behind docs/benchmarks.md's table: a device- or system-scope fence that every thread
    executes stalls warps at MEMBAR; no fence, a block-scope fence or a system-scope atomic does not."""
    run = captured(f"table-{size}")
    c = compare_runs([run], "none", GroupBy.LABEL)
    share = {s.group: 100 * (s.membar_share or 0.0) for s in c.summaries}
    assert len(share) == 8 and all(s.launches == 2 for s in c.summaries) and c.clock_control == "none"
    assert all(share[v] >= floor for v in ("device_before_atomic", "system_before_atomic", "device_before_return"))
    assert share["none"] == share["block_before_atomic"] == share["system_scope_atomic"] == 0.0
    assert all(0.0 < share[v] < 2.0 for v in ("device_after_atomic", "device_thread0_only"))
    assert run.meta["shape"] == f"{size}x{size}x{size}"


def test_ncu_and_tracer_when_no_kernel_matches() -> None:
    log, said = NCU / "logs" / "no_kernels.log", NCU / "logs" / "no_kernels.tracer.txt"
    if not log.is_file():
        pytest.skip(f"{log} not captured yet")
    assert classify(log.read_text()) is Failure.NO_KERNELS
    assert available_kernels(log.read_text()) == ["cast_transpose", "distribution_elementwise_grid_stride_kernel",
                                                  "vectorized_elementwise_kernel"]
    text = said.read_text()  # what tracer (before it read ncu's own list) said on the H200: exit 2, one line
    assert text.startswith("tracer: error: no kernel launch matched --kernel-name regex:no_such_kernel_xyz")
    assert "the kernels that ran: " in text and "cast_transpose" in text and text.count("\n") == 1


def test_ncu_without_access_to_the_counters() -> None:
    log = NCU / "logs" / "counter_permission.log"
    if not log.is_file():
        pytest.skip(f"{log} not captured yet (scripts/capture_ncu.py OUT --steps perm, on a GPU machine whose driver "
                    f"restricts profiling to admin users)")
    assert classify(log.read_text()) is Failure.COUNTER_PERMISSION
    assert "ERR_NVGPUCTRPERM" in CAUSES[Failure.COUNTER_PERMISSION]
