"""What scripts/capture_ncu.py captured on the H200 through `tracer profile` (tests/data/ncu/variants,
triton, logs): the run's records and a CPU import of its reports give the same numbers, NVTX paths
name tracer's ranges, and a fence shows up as memory-barrier stalls. Skipped until captured."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.ncu import pri
from tracer.ncu.compare import GroupBy, compare, groups
from tracer.ncu.reader import read_report
from tracer.ncu.runner import Failure, classify
from tracer.ncu.store import ProfileRun, load_run

NCU = DATA / "ncu"


def captured(name: str) -> ProfileRun:
    path = NCU / name / "profile.json"
    if not path.is_file():
        pytest.skip(f"{path.parent} not captured yet (python scripts/capture_ncu.py OUT on a GPU machine, then copy "
                    f"OUT/tests_data_ncu/* into tests/data/ncu/)")
    return load_run(path)


def same_numbers(run: ProfileRun, prefer_csv: bool) -> None:
    for t in run.targets:
        again = read_report(NCU / Path(run.path).name / t.report.path, prefer_csv=prefer_csv)
        assert len(again.launches) == len(t.report.launches)
        for a, b in zip(t.report.launches, again.launches):
            assert (a.id, a.name, a.grid, a.block) == (b.id, b.name, b.grid, b.block)
            for f in ("duration_ns", "dram_pct", "l2_pct", "occupancy_pct", "ipc", "cycles_per_issue"):
                assert getattr(a, f) == pytest.approx(getattr(b, f), rel=1e-5), f
            assert dict(a.stalls) == pytest.approx(dict(b.stalls), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("name", ["variants", "triton"])
def test_a_cpu_import_gives_the_numbers_of_the_gpu_run(name: str) -> None:
    run = captured(name)
    if pri.load_module() is None:
        pytest.skip("the ncu-report package is not installed (pip install ncu-report)")
    same_numbers(run, prefer_csv=False)


@pytest.mark.parametrize("name", ["variants", "triton"])
def test_the_csv_exports_give_the_same_numbers(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run = captured(name)
    monkeypatch.setattr(pri, "load_module", lambda: None)
    same_numbers(run, prefer_csv=True)


def test_variants_carry_nvtx_paths_ipc_and_the_fence_as_membar_stalls() -> None:
    run = captured("variants")
    if pri.load_module() is None:
        pytest.skip("the ncu-report package is not installed (NVTX paths are read from the .ncu-rep)")
    reports = {t.label: read_report(NCU / "variants" / t.report.path) for t in run.targets}
    none = reports["none"].launches
    assert {x.nvtx[-1] for x in none} == {"tracer@step0/layer0/mb0/cast_weight", "tracer@step0/layer0/mb0/cast_transpose"}
    assert all(x.ipc is not None and x.ipc > 0 for r in reports.values() for x in r.launches)
    c = compare(groups([run], GroupBy.LABEL), "none", run.clock_control)
    assert c.summary("device_before_atomic").membar_share > c.summary("none").membar_share  # type: ignore[operator]
    assert run.clock_control == "none" and reports["none"].clock_control == "none"


def test_the_triton_program_has_its_kernels_and_ranges() -> None:
    run = captured("triton")
    (t,) = run.targets
    names = {x.name for x in t.report.launches}
    assert any("axpy" in n for n in names) and len(names) >= 2
    if pri.load_module() is not None:
        rep = read_report(NCU / "triton" / t.report.path)
        assert any(x.nvtx[-2:] == ("iter0", "axpy") for x in rep.launches)


def test_ncu_and_tracer_when_no_kernel_matches() -> None:
    log, said = NCU / "logs" / "no_kernels.log", NCU / "logs" / "no_kernels.tracer.txt"
    if not log.is_file():
        pytest.skip(f"{log} not captured yet")
    assert classify(log.read_text()) is Failure.NO_KERNELS
    text = said.read_text()
    assert text.startswith("tracer: error: no kernel launch matched --kernel-name regex:no_such_kernel_xyz")
    assert "the kernels that ran: " in text and "cast_transpose" in text and text.count("\n") == 1
