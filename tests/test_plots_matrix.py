"""The sanitizer verdict matrix against the expectation (caught / MISSED / clean) and the ablation
chart's rate axis, on the demo data captured on an H200."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib
import pytest

from tracer.campaign.stats import CellStats
from tracer.artifact import open_campaign, open_sanitize
from tracer.views.plots.ablation import draw_ablation, rate_limit
from tracer.views.plots.verdicts import STATE_COLORS, cell_state, draw_verdicts, expected_tools
from tracer.sanitize.model import Finding, SanVerdict, ToolRun

DEMO = Path(__file__).resolve().parent.parent / "tracer" / "data" / "demo"


@pytest.fixture(scope="module")
def runs() -> list[ToolRun]:
    return list(open_sanitize(DEMO / "sanitize").runs)


def test_expectation_table_is_the_selftests() -> None:
    assert expected_tools() == {"planted_race": "racecheck", "planted_oob": "memcheck",
                                "planted_uninit": "initcheck", "planted_barrier": "synccheck"}


def test_every_intended_catch_is_caught_even_when_the_target_failed_after(runs: list[ToolRun]) -> None:
    cells = {(r.workload, r.tool.value): cell_state(r) for r in runs}
    for workload, tool in expected_tools().items():
        c = cells[(workload, tool)]
        assert c.state == "caught" and c.expected and not c.faded and c.text.startswith("✓ caught")
    # memcheck found the write past every allocation, then the target crashed: caught, not a crash
    assert "then the target failed" in cells[("planted_oob", "memcheck")].text
    assert "then the target failed" in cells[("planted_barrier", "synccheck")].text
    # the other tools on a planted workload are faded and keep their own verdict
    other = cells[("planted_oob", "racecheck")]
    assert other.state == "target-failed" and other.faded and not other.expected
    assert cells[("planted_race", "memcheck")].state == "clean" and cells[("planted_race", "memcheck")].faded
    clean = cells[("cast_transpose_dgrad", "memcheck")]
    assert clean.state == "clean" and not clean.faded and "34 suppressed" in clean.text


def test_a_missed_defect_is_red_and_unexpected_errors_stay_errors(runs: list[ToolRun]) -> None:
    five = Finding(tool="racecheck", kind="RAW hazard", kernel="k", source="", count=5, hazards=5, level="error", message="")
    changed = {("planted_barrier", "synccheck"): {"errors_found": False, "findings": ()},  # the target failed, synccheck saw nothing
               ("cast_transpose_dgrad", "racecheck"): {"verdict": SanVerdict.ERRORS, "errors_found": True, "findings": (five,)}}
    runs = [dataclasses.replace(r, **changed.get((r.workload, r.tool.value), {})) for r in runs]
    cells = {(r.workload, r.tool.value): cell_state(r) for r in runs}
    missed = cells[("planted_barrier", "synccheck")]
    assert missed.state == "MISSED" and missed.text == "✗ MISSED\n(target-failed)"
    assert cells[("cast_transpose_dgrad", "racecheck")].state == "errors"
    fig = draw_verdicts(runs)
    faces = {matplotlib.colors.to_hex(p.get_facecolor()) for p in fig.axes[0].patches if p.get_fill()}
    assert STATE_COLORS["MISSED"] in faces and STATE_COLORS["caught"] in faces
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "MISSED by the expected tool" in legend


def test_matrix_figure_marks_the_expected_tool(runs: list[ToolRun]) -> None:
    fig = draw_verdicts(runs)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 20 and sum(t.startswith("✓ caught") for t in texts) == 4
    assert not any(t.startswith("target-failed\n") for t in texts)
    outlines = [p for p in ax.patches if not p.get_fill()]
    assert len(outlines) == 4
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0].startswith("caught") and any(t.startswith("outlined:") for t in legend)
    assert not any(t.startswith("MISSED") for t in legend)  # only what is drawn


def test_a_workload_without_expectation_shows_its_verdict(runs: list[ToolRun]) -> None:
    c = cell_state(next(r for r in runs if (r.workload, r.tool.value) == ("planted_oob", "racecheck")), expected={})
    assert c.state == "target-failed" and not c.faded and not c.expected


def test_ablation_rate_axis_stays_within_zero_one() -> None:
    cells = list(open_campaign(DEMO / "campaign.json").cells)
    fig = draw_ablation(cells)
    ax = fig.axes[0]
    assert ax.get_xlim() == (0.0, 1.0)  # 95/100 has an upper bound of 0.984: the axis stops at 1
    fig.canvas.draw()
    labels = [t for t in ax.texts if t.get_text().endswith("/100") or "/100 " in t.get_text()]
    assert len(labels) == len(cells)
    right = ax.get_window_extent().x1
    assert all(t.get_window_extent().x0 >= right for t in labels)  # a column right of the axes, never over data
    zeros = [CellStats(label="a", trials=100, failures=0, rate=0.0, lower=0.0, upper=0.0295, one_sided=True)]
    assert rate_limit(zeros) == 0.05
    assert rate_limit([CellStats(label="b", trials=10, failures=3, rate=0.3, lower=0.07, upper=0.65, one_sided=False)]) == pytest.approx(0.715)
