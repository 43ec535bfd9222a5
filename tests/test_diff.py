"""`tracer diff`: the captured seed traces (planted race against the event-ordered fix), the real
NCCL jobs (complete against killed), the demo sanitizer report and campaign, and synthetic traces
with planned timing changes; oracles from the fixtures' own records and the plan, not from the diff."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA
from tests.trace_synthetic import TraceBuilder
from tracer.app.diff import diff_paths
from tracer.compare.result import SCHEMA, DiffKind
from tracer.cli import main
from tracer.compare.timing import Change, KeyKind, Samples, compare_samples, range_key
from tracer.compare.verdicts import Status

ROOT = Path(__file__).resolve().parent.parent
PLANTED = DATA / "hazards" / "planted_cross_stream.sqlite"
FIXED = DATA / "hazards" / "event_ordered_dgrad.sqlite"
DEMO = ROOT / "tracer" / "data" / "demo"
JOB, KILLED = DATA / "jobs" / "ddp_nccl_2ranks", DATA / "jobs" / "ddp_nccl_killed"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["diff", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


# ---- statistics ----------------------------------------------------------------------------------

def samples(**by: np.ndarray) -> Samples:
    return Samples({(KeyKind.KERNEL, k): v for k, v in by.items()})


def test_a_planted_shift_is_beyond_noise_and_its_interval_holds_the_true_ratio() -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(10_000, 300, 60)
    a = samples(gemm=base, copy=rng.normal(5_000, 200, 60))
    b = samples(gemm=rng.normal(12_000, 300, 60), copy=rng.normal(5_000, 200, 60))
    got = {c.name: c for c in compare_samples(a, b)}
    assert got["gemm"].change is Change.SLOWER and got["gemm"].ci_low < 1.2 < got["gemm"].ci_high
    assert got["gemm"].p_holm < 0.05
    assert got["copy"].change is Change.WITHIN_NOISE


def test_too_few_instances_are_never_judged_and_missing_keys_are_new_or_gone() -> None:
    a = samples(one=np.array([1_000, 1_010]), gone=np.array([5, 6, 7]))
    b = samples(one=np.array([9_000, 9_100]), new=np.array([5, 6, 7]))
    got = {c.name: c.change for c in compare_samples(a, b)}
    assert got == {"one": Change.UNJUDGED, "gone": Change.GONE, "new": Change.NEW}


def test_holm_keeps_noise_within_noise_over_many_keys() -> None:
    rng = np.random.default_rng(3)
    a = samples(**{f"k{i}": rng.normal(1_000, 50, 20) for i in range(200)})
    b = samples(**{f"k{i}": rng.normal(1_000, 50, 20) for i in range(200)})
    assert all(c.change is Change.WITHIN_NOISE for c in compare_samples(a, b))


def test_step_numbers_are_pooled_in_range_keys() -> None:
    assert range_key("step3/layer0/dgrad") == "step*/layer0/dgrad"
    assert range_key("ProfilerStep#12") == "ProfilerStep#*"
    assert range_key("layer3/dgrad") == "layer3/dgrad"


# ---- the seed traces -----------------------------------------------------------------------------

def hazard_rows(path: Path) -> int:
    """Hazards of the fixture by the analysis of one trace (the oracle for the diff's totals)."""
    from tracer.artifact import open_artifact
    from tracer.analysis.pairs import PairSpec

    return open_artifact(path).analyze(PairSpec.from_json("none")).hazards.found


def test_the_fix_makes_every_planted_hazard_gone_and_none_new() -> None:
    d = diff_paths(PLANTED, FIXED)
    assert d.kind is DiffKind.TRACE and d.hazards is not None and d.hazards.checked
    assert (d.hazards.found_a, d.hazards.found_b) == (hazard_rows(PLANTED), hazard_rows(FIXED)) == (10, 0)
    assert {r.status for r in d.hazards.rows} == {Status.GONE}
    assert sum(r.a for r in d.hazards.rows) == 10
    assert d.failures(new_hazard=True) == []
    back = diff_paths(FIXED, PLANTED)
    assert len(back.failures(new_hazard=True)) == len(d.hazards.rows) == 4
    spin = [t for t in back.timing if "spin_kernel" in t.name]  # the planted delay kernel only the race run has
    assert [t.change for t in spin] == [Change.NEW]


def test_gate_exit_codes_and_the_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, FIXED, PLANTED, "--fail-on-new-hazard", "--json")
    data = json.loads(out)
    assert code == 1 and err.count("\n") == 1 and "new hazard: RAW" in err
    assert data["schema"] == SCHEMA and data["kind"] == "diff" and data["compared"] == "trace" and data["hazards"]["new"] == 4
    assert set(data) >= {"a", "b", "matching", "statistics", "pairs", "hazards", "timing", "no_change"}
    code, out, _ = run(capsys, PLANTED, FIXED, "--fail-on-new-hazard")
    assert code == 0 and "hazards: 10 -> 0" in out


def test_a_run_against_itself_is_no_change(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, PLANTED, PLANTED, "--fail-on-new-hazard", "--fail-on-regression", "0")
    assert code == 0 and "no change: the same input on both sides" in out
    d = diff_paths(PLANTED, PLANTED)
    assert d.no_change and all(t.change in (Change.WITHIN_NOISE, Change.UNJUDGED) for t in d.timing)


def test_two_kinds_are_refused_in_one_line_naming_both(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, PLANTED, DEMO / "sanitize")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "(a trace)" in err and "(a sanitizer report)" in err


# ---- jobs ----------------------------------------------------------------------------------------

def test_a_partial_job_is_marked_and_every_gate_fails_closed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, JOB, KILLED)
    assert code == 0 and "warning: B is incomplete: rank 1" in out and "no change" not in out
    assert "steps do not line up (A 6, B 5)" in out
    code, _, err = run(capsys, JOB, KILLED, "--fail-on-regression", "1000")
    assert code == 1 and "B is incomplete" in err
    assert diff_paths(JOB, JOB).failures(regression_pct=1000) == []


# ---- synthetic traces with a planned slowdown -----------------------------------------------------

def slow_trace(path: Path, gemm_ns: int, steps: int = 12) -> Path:
    b, rng = TraceBuilder(), np.random.default_rng(gemm_ns)
    for s in range(steps):
        b.push(f"step{s}")
        for name, dur in (("gemm", gemm_ns), ("norm", 4_000)):
            b.push(f"step{s}/{name}")
            b.launch(7, name, int(dur + rng.integers(0, 200)))
            b.pop()
        b.pop()
    return b.write(path)


def test_regression_gate_fires_only_beyond_noise_and_above_the_percentage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = slow_trace(tmp_path / "a.sqlite", 10_000), slow_trace(tmp_path / "b.sqlite", 13_000, steps=9)
    d = diff_paths(a, b)
    got = {(t.kind, t.name): t for t in d.timing}
    gemm = got[(KeyKind.KERNEL, "gemm")]
    assert gemm.change is Change.SLOWER and 28 < gemm.percent < 32
    assert got[(KeyKind.RANGE, "step*/gemm")].change is Change.SLOWER
    assert got[(KeyKind.KERNEL, "norm")].change is Change.WITHIN_NOISE
    assert "A 12, B 9" in d.matching
    assert run(capsys, a, b, "--fail-on-regression", "50")[0] == 0
    code, _, err = run(capsys, a, b, "--fail-on-regression", "20")
    assert code == 1 and "kernel gemm +" in err and "norm" not in err


# ---- sanitizer reports and campaigns --------------------------------------------------------------

def test_sanitizer_findings_new_fixed_and_unjudged_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads((DEMO / "sanitize" / "report.json").read_text())
    race = next(r for r in report["runs"] if r["workload"] == "planted_race" and r["tool"] == "racecheck")
    race["findings"], race["verdict"], race["errors_found"] = [], "clean", False
    (tmp_path / "fixed.json").write_text(json.dumps(report))
    code, out, err = run(capsys, tmp_path / "fixed.json", DEMO / "sanitize", "--fail-on-new-finding")
    assert code == 1 and "new finding: racecheck" in err
    assert "run not judged: A planted_oob/memcheck: target-failed" in err  # fail closed: a crashed run proves nothing
    d = diff_paths(DEMO / "sanitize", tmp_path / "fixed.json")
    assert {r.key[1] for r in d.findings.rows if r.status is Status.GONE} == {"racecheck"}


def test_campaign_rates_compared_with_fisher(tmp_path: Path) -> None:
    data = json.loads((DEMO / "campaign.json").read_text())
    data["variants"]["planted_cross_stream"]["failures"] = 5
    (tmp_path / "after.json").write_text(json.dumps(data))
    d = diff_paths(DEMO / "campaign.json", tmp_path / "after.json")
    cells = {c.label: c for c in d.cells}
    assert cells["planted_cross_stream"].status is Status.CHANGED and cells["planted_cross_stream"].p_value < 1e-6
    assert all(c.status is Status.UNCHANGED for k, c in cells.items() if k != "planted_cross_stream")


def test_unreadable_input_is_a_format_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.sqlite"
    sqlite3.connect(bad).execute("CREATE TABLE x (y)").connection.commit()
    code, _, err = run(capsys, PLANTED, bad)
    assert code == 6 and err.count("\n") == 1


def test_html_and_picture_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, PLANTED, FIXED, "--html", tmp_path / "d.html", "--plot", tmp_path / "d.png")
    page = (tmp_path / "d.html").read_text()
    assert code == 0 and "wrote" in err and "spin_kernel" in page and "data:image/png;base64," in page
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"
    code, _, err = run(capsys, DEMO / "campaign.json", DEMO / "campaign.json", "--plot", tmp_path / "c.png")
    assert code == 2 and "--plot draws traces and jobs" in err


def test_the_picture_colours_a_bar_by_its_range_else_its_kernel() -> None:
    from tracer.views.plots.diff import bar_change, key_changes

    d = diff_paths(PLANTED, FIXED)
    changes = key_changes(d)
    assert bar_change(changes, "", "at::cuda::(anonymous namespace)::spin_kernel(long)") is Change.GONE
    assert bar_change(changes, "step*/layer0/mb0/dgrad", "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_TNT") is Change.WITHIN_NOISE
    la, lb = d.layouts
    streams = {f"s{s}" for (s,) in sqlite3.connect(PLANTED).execute("SELECT DISTINCT streamId FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    assert la.step.startswith("step") and set(la.lanes) <= streams and len(la.lanes) == 2
    assert la.start.min() == 0 and (la.end >= la.start).all() and len(la.kernel) == len(la.range) == len(la.start)


@pytest.mark.parametrize("n", [3, 8, 51, 392])
def test_exact_bootstrap_medians_match_brute_force_resampling(n: int) -> None:
    from tracer.compare.timing import bootstrap_medians

    rng = np.random.default_rng(n)
    x = rng.lognormal(8, 0.5, n)
    brute = np.median(x[rng.integers(0, n, size=(20_000, n))], axis=1)
    exact = bootstrap_medians(x, 20_000, rng)
    for q in (2.5, 50, 97.5):  # the interval's ends and the middle, within 1% of the sample's spread
        assert abs(np.percentile(exact, q) - np.percentile(brute, q)) <= 0.01 * np.ptp(x) + 1e-9


@pytest.mark.parametrize("na,nb,ties", [(9, 12, False), (40, 30, True), (400, 391, True), (3, 5, False)])
def test_mann_whitney_p_is_scipys(na: int, nb: int, ties: bool) -> None:
    from scipy import stats

    from tracer.compare.timing import mann_whitney_p

    rng = np.random.default_rng(na * nb)
    a, b = rng.normal(1_000, 40, na), rng.normal(1_020, 40, nb)
    if ties:
        a, b = np.round(a, -1), np.round(b, -1)
    method = "asymptotic" if min(na, nb) > 8 else "auto"
    want = stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue
    assert mann_whitney_p(a, b) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_profile_targets_of_one_run_and_the_demo_diffs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variants = DATA / "ncu" / "variants"
    want = {t["label"]: [x["duration_ns"] for x in t["report"]["launches"]]
            for t in json.loads((variants / "profile.json").read_text())["targets"]}
    d = diff_paths(variants, variants, targets=("none", "device_before_atomic"))
    (t,) = [x for x in d.timing if x.kind is KeyKind.KERNEL]
    assert t.change is Change.UNJUDGED and not d.no_change and not d.same_input
    assert t.ratio == pytest.approx(np.median(want["device_before_atomic"]) / np.median(want["none"]))
    code, _, err = run(capsys, variants, variants, "--targets", "none,nope")
    assert code == 2 and "'nope'" in err and "device_before_atomic" in err
    assert main(["demo", "-o", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "hazards: 10 -> 0" in out and "fence variant none -> device_before_atomic" in out
    assert (tmp_path / "demo" / "diff.png").stat().st_size > 1000 and (tmp_path / "demo" / "diff.html").is_file()


# ---- what the speed-ups must not change -----------------------------------------------------------

def binomial_cdf_medians(x: np.ndarray, draws: int, seed: int) -> np.ndarray:
    """An independent route to the bootstrap distribution of the median (odd n): P(the resample's
    median <= the k-th smallest of x) = P(Binomial(n, (k + 1) / n) >= (n + 1) / 2), inverted at
    uniform draws over every k."""
    from scipy import special

    xs, n = np.sort(x), len(x)
    k = np.arange(n)
    cdf = special.bdtrc((n + 1) // 2 - 1, n, (k + 1) / n)
    u = np.random.default_rng(seed).random(draws)
    return xs[k[np.minimum(np.searchsorted(cdf, u), n - 1)]].astype(np.float64)


@pytest.mark.parametrize("n", [1_001, 20_001, 200_001])
def test_bootstrap_medians_follow_the_binomial_cdf_of_order_statistics(n: int) -> None:
    from tracer.compare.timing import bootstrap_medians

    x = np.random.default_rng(n).integers(1_000, 1_400, n)  # integer nanoseconds, many ties
    got = np.sort(bootstrap_medians(x, 20_000, np.random.default_rng(7)))
    want = np.sort(binomial_cdf_medians(x, 20_000, 8))
    for q in (2.5, 10, 50, 90, 97.5):  # the quantiles of two samples of 20,000 from one distribution
        assert abs(np.percentile(got, q) - np.percentile(want, q)) <= 1.0, q
    assert abs(np.percentile(got, 97.5) - np.percentile(got, 2.5) - (np.percentile(want, 97.5) - np.percentile(want, 2.5))) <= 2.0


@pytest.mark.parametrize("n", [2, 4, 10, 64])
def test_bootstrap_medians_of_even_n_match_brute_force_resampling(n: int) -> None:
    from tracer.compare.timing import bootstrap_medians

    rng = np.random.default_rng(n)
    x = rng.lognormal(8, 0.5, n)
    brute = np.median(x[rng.integers(0, n, size=(40_000, n))], axis=1)
    exact = bootstrap_medians(x, 40_000, rng)
    for q in (2.5, 25, 50, 75, 97.5):
        assert abs(np.percentile(exact, q) - np.percentile(brute, q)) <= 0.01 * np.ptp(x) + 1e-9, q


@pytest.mark.parametrize("na,nb", [(5_000, 4_000), (200_000, 150_000)])
def test_mann_whitney_p_over_distinct_values_is_scipys_on_tied_nanoseconds(na: int, nb: int) -> None:
    from scipy import stats

    from tracer.compare.timing import mann_whitney_p

    rng = np.random.default_rng(na)
    a, b = rng.integers(10_000, 10_300, na), rng.integers(10_002, 10_300, nb)
    want = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
    assert mann_whitney_p(a, b) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_a_trace_diff_with_nine_or_more_instances_per_key_does_not_import_scipy(tmp_path: Path) -> None:
    """scipy.stats costs about a second of start-up (scipy.special a third); only keys with at most 8
    instances on a side (scipy's exact Mann-Whitney) need scipy."""
    import os
    import subprocess
    import sys

    a, b = slow_trace(tmp_path / "a.sqlite", 10_000), slow_trace(tmp_path / "b.sqlite", 13_000, steps=9)
    probe = ("import sys; from tracer.cli import main; rc = main(['diff', sys.argv[1], sys.argv[2], '--json']); "
             "print('scipy.stats' in sys.modules, 'scipy.special' in sys.modules, rc, file=sys.stderr)")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", probe, str(a), str(b)], capture_output=True, text=True, env=env, timeout=300)
    assert res.stderr.split()[-3:] == ["False", "False", "0"], res.stderr[-2000:]


def test_batched_range_and_step_keys_are_the_one_at_a_time_ones() -> None:
    from tracer.analysis.job_summary import range_keys, step_key, step_keys

    names = ["step3/layer0/mb1/dgrad", "step3/layer0/mb1/wgrad", " step12 /fwd", "ProfilerStep#7", "ProfilerStep#7/x",
             "iteration_2/a/b", "iter.9", "step/x", "layer3/step4", "gemm", "", "/lead", "stepped3/x", "Step3/", "step3/x/y/"]
    names += [f"step{i}/layer{i % 3}" for i in range(50)]
    assert range_keys(names) == [range_key(n) for n in names]
    assert step_keys(names) == [step_key(n) for n in names]
