"""Command-line selections that select nothing or cannot be read: one-line errors, never an empty
picture or a silently ignored option (CUPTI capture from an H200 in tests/data/traces)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.cli import main

CTD = DATA / "traces" / "cast_transpose_dgrad.sqlite"


def _plot(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["plot", "stream-timeline", str(CTD), "-o", str(tmp_path / "t.png"), *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("extra,message", [
    (["--range", "("], "--range '(' is not a regular expression (missing ), unterminated subpattern at position 0)"),
    (["--range", "["], "--range '[' is not a regular expression"),
    (["--window", "1e999:2e999"], "--window '1e999:2e999': '1e999' is not a finite number of microseconds"),
    (["--window", "nan:5"], "is not a finite number"),
    (["--window", "5000:1000"], "--window '5000:1000': START must be below END"),
    (["--window", "5:6:7"], "is not START:END"),
    (["--range", "^nosuch/"], "--range '^nosuch/' matches no NVTX range holding a kernel (closest: 'step"),
    (["--window", "99999999:"], "--window 1e+08:inf holds no GPU operation"),
])
def test_bad_or_empty_selections_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    code, err = _plot(tmp_path, capsys, *extra)
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and not (tmp_path / "t.png").exists() and not list(tmp_path.iterdir())


def test_control_a_matching_range_draws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _plot(tmp_path, capsys, "--range", "^step1/", "--window", "0:")
    assert code == 0 and (tmp_path / "t.png").stat().st_size > 1000


def test_report_range_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(CTD), "-o", str(tmp_path / "r.html"), "--range", "["]) == 2
    assert "is not a regular expression" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_campaign_report_with_an_unknown_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.campaign.grid import load_campaign
    from tracer.campaign.trials_db import Store, TrialRow

    profile = tmp_path / "c.yaml"
    profile.write_text(json.dumps({"schema": 1, "name": "t", "workload": "cpu_reference", "variants": ["none", "device_before_atomic"],
                                   "trials_per_cell": 2}))
    store = Store.open(tmp_path / "s.sqlite", create=True)
    store.init(load_campaign(str(profile)), {})
    store.add_trials([TrialRow(cell_id=c, trial=t, failed=t == 0, crashed=False, first_failure=None, failed_checks="", gpu="cpu0", worker="w",
                               seconds=0.1) for c in (1, 2) for t in range(2)])
    store.con.close()
    assert main(["campaign", "report", str(tmp_path / "s.sqlite"), "--baseline", "nosuch"]) == 2
    assert "unknown baseline 'nosuch' (allowed: none, device_before_atomic)" in capsys.readouterr().err
    assert main(["campaign", "report", str(tmp_path / "s.sqlite"), "--baseline", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["baseline"] == "none"
