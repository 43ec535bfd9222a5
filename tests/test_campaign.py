"""Campaigns on the CPU: statistics against scipy, the store's atomic batches, resume after kill -9
with identical results, crashed workers recorded and replaced, profile validation."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scipy import stats

from tracer.campaign.grid import load_campaign
from tracer.campaign.stats import (Decision, cell_stats, clopper_pearson, compare_to_baseline, fisher_less, holm, sprt,
                                   trials_needed, zero_failure_upper)
from tracer.campaign.trials_db import Store, TrialRow
from tracer.errors import ProfileError, TraceFormatError, UsageError

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("k,n", [(0, 10), (0, 300), (3, 100), (50, 100), (100, 100), (1, 1), (7, 2000)])
def test_clopper_pearson_matches_scipy_exact(k: int, n: int) -> None:
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    lo, hi = clopper_pearson(k, n)
    assert math.isclose(lo, ref.low, abs_tol=1e-12) and math.isclose(hi, ref.high, rel_tol=1e-9)


def test_zero_failures_use_the_one_sided_bound() -> None:
    c = cell_stats("v", 0, 300)
    assert c.one_sided and c.lower == 0.0
    assert math.isclose(c.upper, 1 - 0.05 ** (1 / 300)) and abs(c.upper - 3 / 300) < 0.0003
    assert c.upper < clopper_pearson(0, 300)[1]  # tighter than the two-sided interval's
    assert math.isclose(zero_failure_upper(299), 0.00997, abs_tol=1e-5)
    full = cell_stats("v", 20, 20)
    assert full.rate == 1.0 and full.upper == 1.0


def test_trials_needed() -> None:
    assert trials_needed(0.01) == 299 and trials_needed(0.001) == 2995


def test_fisher_and_holm() -> None:
    p = fisher_less(0, 300, 12, 300)
    assert math.isclose(p, stats.fisher_exact([[0, 300], [12, 288]], alternative="less").pvalue)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    cells = compare_to_baseline([cell_stats("none", 12, 300), cell_stats("fence", 0, 300), cell_stats("other", 10, 300)], "none")
    fence = next(c for c in cells if c.label == "fence")
    assert fence.p_vs_baseline == pytest.approx(p) and fence.p_holm == pytest.approx(min(1, 2 * p))
    with pytest.raises(UsageError, match="unknown baseline 'zzz'"):
        compare_to_baseline(cells, "zzz")


def test_sprt_decisions() -> None:
    assert sprt(0, 10, 0.001, 0.05) is Decision.CONTINUE
    assert sprt(0, 200, 0.001, 0.05) is Decision.BELOW
    assert sprt(10, 60, 0.001, 0.05) is Decision.ABOVE
    with pytest.raises(UsageError, match="0 < p0 < p1 < 1"):
        sprt(0, 1, 0.1, 0.01)


def _profile(tmp_path: Path, **over: object) -> Path:
    data = {"schema": 1, "name": "t", "workload": "cpu_reference", "variants": ["none", "device_before_atomic"],
            "trials_per_cell": 60, "batch": 10, "inject_failure_rate": 0.2, "baseline": "none"}
    data.update(over)
    p = tmp_path / "c.yaml"
    p.write_text(json.dumps(data))
    return p


def _run(profile: Path, store: Path, *extra: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracer", "campaign", "run", str(profile), "-o", str(store),
                           "--no-progress", *extra], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _outcomes(store: Path) -> dict[tuple[int, int], int]:
    s = Store.open(store)
    return {(c, t): f for c, t, f in s.con.execute("SELECT cell_id, trial, failed FROM trials")}


def _count_once_made(store: Path) -> int:
    """Trials stored so far; 0 while the store is still being made (the file exists before its tables)."""
    try:
        return len(_outcomes(store))
    except TraceFormatError:
        return 0


def test_batch_is_all_or_nothing(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "s.sqlite", create=True)
    s.init(load_campaign(str(_profile(tmp_path))), {})
    s.con.execute("BEGIN IMMEDIATE")
    s.con.execute("INSERT INTO trials (cell_id, trial, failed) VALUES (1, 0, 0)")
    s.con.close()  # killed mid-transaction
    assert Store.open(tmp_path / "s.sqlite").done_trials(1) == set()
    s = Store.open(tmp_path / "s.sqlite")
    rows = [TrialRow(cell_id=1, trial=t, failed=False, crashed=False, first_failure=None, failed_checks="", gpu="cpu0", worker="w",
                     seconds=0.1) for t in range(5)]
    assert s.add_trials(rows) == 5 and s.add_trials(rows) == 0  # merging again changes nothing
    assert s.done_trials(1) == set(range(5))


def test_resume_after_kill_9_gives_the_same_trials(tmp_path: Path) -> None:
    profile = _profile(tmp_path, trials_per_cell=200, batch=5)
    clean = _run(profile, tmp_path / "clean.sqlite", "--workers", "2")
    assert clean.returncode == 0, clean.stderr
    store = tmp_path / "killed.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "tracer", "campaign", "run", str(profile), "-o", str(store),
                             "--no-progress", "--workers", "2"], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.3)
        if store.is_file() and 20 < _count_once_made(store) < 350:
            break
    os.kill(proc.pid, signal.SIGKILL)  # the campaign process only: its workers must die with it
    proc.wait()
    time.sleep(1.0)
    partial = len(_outcomes(store))
    time.sleep(1.0)
    assert len(_outcomes(store)) == partial, "workers outlived the killed campaign"
    assert 0 < partial < 400
    resumed = _run(profile, store, "--workers", "2")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{400 - partial} to run" in resumed.stderr
    assert _outcomes(store) == _outcomes(tmp_path / "clean.sqlite")  # nothing lost, nothing twice, same outcomes


def test_crashed_worker_is_recorded_rerun_and_replaced(tmp_path: Path) -> None:
    profile = _profile(tmp_path, kill_trial=13, trials_per_cell=40)
    res = _run(profile, tmp_path / "s.sqlite", "--workers", "2")
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("exited -9 (signal 9)") == 4  # trial 13 of both cells, each run twice
    assert res.stderr.count("crashed 2 times: stored as crashed") == 2
    s = Store.open(tmp_path / "s.sqlite")
    assert len(s.crashes()) == 4
    crashed = s.con.execute("SELECT cell_id, trial FROM trials WHERE crashed = 1").fetchall()
    assert {t for _, t in crashed} == set(range(10, 20))  # the chunk holding trial 13, stored as crashed
    assert len(s.done_trials(1)) == 40 and len(s.done_trials(2)) == 40
    report = subprocess.run([sys.executable, "-m", "tracer", "campaign", "report", str(tmp_path / "s.sqlite"), "--json"],
                            capture_output=True, text=True, cwd=ROOT, check=True)
    data = json.loads(report.stdout)
    assert len(data["crashes"]) == 4 and all(c["exit_code"] == -9 for c in data["crashes"])


def test_statistics_find_the_injected_difference(tmp_path: Path) -> None:
    res = _run(_profile(tmp_path, trials_per_cell=300, batch=50), tmp_path / "s.sqlite", "--workers", "2")
    assert res.returncode == 0, res.stderr
    cells = {c["cell"]: c for c in json.loads(subprocess.run(
        [sys.executable, "-m", "tracer", "campaign", "report", str(tmp_path / "s.sqlite"), "--json"],
        capture_output=True, text=True, cwd=ROOT, check=True).stdout)["cells"]}
    none, fixed = cells["none"], cells["device_before_atomic"]
    assert 0.12 < none["rate"] < 0.3 and none["ci95"][0] < 0.2 < none["ci95"][1]
    assert fixed["failures"] == 0 and fixed["one_sided"] and fixed["p_holm"] < 1e-6
    assert {g for c in cells.values() for g in c["gpus"].split(",")} == {"cpu0", "cpu1"}


@pytest.mark.parametrize("over,message", [
    ({"variants": ["nope"]}, r"key 'variants' has value 'nope' \(allowed:"),
    ({"trials_per_cell": 0}, r"key 'trials_per_cell' = 0 is below the minimum 1"),
    ({"checks": ["fp8"]}, r"key 'checks' has value 'fp8' \(allowed: fp8_rowwise"),
    ({"baseline": "zzz"}, r"key 'baseline' = 'zzz' is not a cell"),
    ({"executor": {"kind": "ray"}}, r"key 'executor.kind' has value 'ray' \(allowed: local, slurm\)"),
    ({"sprt": {"p0": 0.2, "p1": 0.1}}, r"key 'sprt' needs 0 < p0 < p1 < 1"),
    ({"extra_cells": [{"variant": "none"}]}, r"key 'extra_cells\[0\]' must be a mapping with workload"),
    ({"trialz": 3}, r"key 'trialz' is unknown"),
])
def test_profile_validation(tmp_path: Path, over: dict, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        load_campaign(str(_profile(tmp_path, **over)))


def test_store_refuses_another_campaign(tmp_path: Path) -> None:
    s = Store.open(tmp_path / "s.sqlite", create=True)
    s.init(load_campaign(str(_profile(tmp_path))), {})
    other = _profile(tmp_path, name="other")
    with pytest.raises(UsageError, match="holds campaign 't', not 'other'"):
        s.init(load_campaign(str(other)), {})


def test_builtin_campaign_profiles_load() -> None:
    fence = load_campaign("fence_ablation")
    assert len(fence.cells()) == 9 and fence.cells()[-1].label == "planted_cross_stream"
    assert load_campaign("cpu_smoke").workload == "cpu_reference"
