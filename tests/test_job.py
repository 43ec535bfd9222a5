"""Jobs (several traced processes under procs/): the real torchrun DDP job captured on an H200
(tests/data/jobs/ddp_gloo_2ranks), the markers of its killed-rank run (ddp_killed_markers), and
synthetic NCCL jobs with planned clock offsets and delays (tests/job_synthetic.py), against oracles
computed here from the markers, the SQLite files and the plan, not from tracer's readers."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.job_synthetic import COMPUTE, COMPUTE_STREAM, END_AFTER, NCCL_STREAM, Plan, marker, rank_trace, write_job
from tracer.artifact import JobRun, TraceRun, open_artifact
from tracer.cli import main
from tracer.errors import TraceFormatError
from tracer.readers.job import Ending, Outcome, is_job_dir, read_processes
from tracer.analysis.job_summary import JobAnalysis, union_stats
from tracer.analysis.pairs import PairMode, PairSpec

GLOO = DATA / "jobs" / "ddp_gloo_2ranks"
KILLED = DATA / "jobs" / "ddp_killed_markers"
ALL = PairSpec(PairMode.ALL)
PLAN = Plan(offsets=(1_500_000, -2_250_000, 40_000), delays=((0, 300_000, 20_000), (500_000, 0, 70_000),
                                                               (0, 120_000, 10_000), (45_000, 0, 5_000)))


def analyzed(path: Path, pairs: PairSpec = ALL) -> JobAnalysis:
    run = open_artifact(path)
    assert isinstance(run, JobRun)
    return run.analyze(pairs)


def markers(folder: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((folder / "procs").glob("*.json"))}


# ---- the real gloo job --------------------------------------------------------------------------

def test_gloo_job_reads_as_two_ranks_and_the_agent_traced_without_kernels() -> None:
    ja = analyzed(GLOO)
    procs = {p.label: p for p in ja.job.processes}
    assert list(procs) == ["rank 0", "rank 1", "pid 2556"]
    assert [(p.rank, p.local_rank, p.world_size, p.pid) for p in procs.values()] == \
        [(0, 0, 2, 2580), (1, 1, 2, 2581), (None, None, None, 2556)]
    assert all(p.outcome is Outcome.COMPLETE and p.ending is Ending.EXITED for p in procs.values())
    assert [len(t.kernels) for t in ja.job.traces] == [71, 71, 0]
    assert ja.summary.collectives_per_process == {} and ja.summary.collectives == ()
    assert [x.label for x in ja.summary.lanes] == ["rank 0 GPU 0 stream 7", "rank 1 GPU 0 stream 7"]
    assert ja.notes == ("traced without kernels (nothing to judge): pid 2556",) and not ja.incomplete


def test_each_process_is_analysed_on_its_own() -> None:
    from tracer.analysis.analyze import analyze
    from tracer.readers.load import load_trace

    ja = analyzed(GLOO)
    for p, a in zip(ja.job.processes, ja.analyses):
        alone = analyze(load_trace(GLOO / "procs" / f"{p.file}.sqlite"), ALL if len(a.trace.kernels) else PairSpec(PairMode.NONE))
        assert a is not None and a.to_json() == alone.to_json()


def test_gloo_clock_offsets_are_the_median_of_each_markers_pairs() -> None:
    ja = analyzed(GLOO)
    label = {p.file: p.label for p in ja.job.processes}
    expected, spreads = {}, {}
    for stem, m in markers(GLOO).items():
        offs = [u - c for c, u in (m["clock_start"], m["clock_end"])]
        expected[label[stem]], spreads[label[stem]] = round(sum(offs) / 2), max(offs) - min(offs)
    c = ja.summary.clock
    assert c.offsets_ns == expected and c.pair_spread_ns == spreads
    assert c.error_ns == max(spreads.values()) and c.basis == "clock pairs" and c.collectives_checked == 0
    assert 0 < c.error_ns < 10_000  # the H200 run: CUPTI's clock is the wall clock, read a few us apart


def _oracle_steps(trace: Path) -> dict[str, tuple[int, int, int]]:
    """(kernels, busy, largest gap) per step from the SQLite file itself: a kernel belongs to the
    step range (NVTX 'stepN') open when its runtime launch call started."""
    con = sqlite3.connect(trace)
    steps = con.execute("SELECT text, start, end FROM NVTX_EVENTS WHERE text LIKE 'step%'").fetchall()
    rows = con.execute("SELECT k.start, k.end, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                       "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId").fetchall()
    out = {}
    for name, lo, hi in steps:
        mine = sorted((s, e) for s, e, launch in rows if lo <= (launch if launch is not None else s) <= hi)
        busy, gap, reach = 0, 0, mine[0][0]
        for s, e in mine:
            gap = max(gap, s - reach)
            busy += max(0, e - max(s, reach))
            reach = max(reach, e)
        out[name] = (len(mine), busy, gap)
    return out


def test_gloo_steps_per_rank_match_the_sqlite_oracle() -> None:
    ja = analyzed(GLOO)
    for r, p in zip(ja.summary.ranks, ja.job.processes):
        oracle = _oracle_steps(GLOO / "procs" / f"{p.file}.sqlite")
        got = {s.step: (s.kernels, s.busy_ns, s.largest_gap_ns) for s in r.steps if s.step.startswith("step")}
        assert got == oracle and list(got) == ["step0", "step1", "step2"]
        outside = [s for s in r.steps if s.step == "outside steps"]
        assert sum(s.kernels for s in r.steps) == 71 and [s.kernels for s in outside] == [71 - sum(o[0] for o in oracle.values())]


def test_union_stats_against_a_brute_force_timeline() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    start = rng.integers(0, 1000, 60)
    end = start + rng.integers(1, 50, 60)
    covered = np.zeros(1100, dtype=bool)
    for s, e in zip(start, end):
        covered[s:e] = True
    lo, hi = int(start.min()), int(end.max())
    idle = ~covered[lo:hi]
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, idle.astype(int), 0])))[::2] if idle.any() else [0]
    assert union_stats(start, end) == (hi - lo, int(covered.sum()), int(max(runs)))


# ---- synthetic NCCL jobs: stragglers and clocks ---------------------------------------------------

def test_straggler_of_each_collective_is_the_planned_latest_arrival(tmp_path: Path) -> None:
    ja = analyzed(write_job(PLAN, tmp_path / "run"))
    s = ja.summary
    assert s.collectives_per_process == {"rank 0": 4, "rank 1": 4, "rank 2": 4}
    assert len(s.collectives) == len(PLAN.delays)
    for c, delays in zip(s.collectives, PLAN.delays):
        assert c.op == "AllReduce" and c.straggler == f"rank {delays.index(max(delays))}"
        assert c.late_ns == max(delays) - min(delays) and c.end_spread_ns == 0
        assert [x.stream for x in c.calls] == [NCCL_STREAM] * 3
        assert {x.end_ns - x.start_ns for x in c.calls} == {END_AFTER + max(delays) - d for d in delays}
    assert s.stragglers()["rank 1"] == {"last": 2, "late_median_ns": 210_000, "late_max_ns": 300_000}
    c = s.clock
    assert c.offsets_ns == {f"rank {r}": o for r, o in enumerate(PLAN.offsets)} and c.error_ns == 0
    assert c.collectives_checked == 4 and c.end_spread_max_ns == 0


def test_lying_clock_pairs_are_caught_by_the_collectives(tmp_path: Path) -> None:
    lie = 40_000
    plan = Plan(PLAN.offsets, PLAN.delays, pair_error=(0, lie, 0))
    s = analyzed(write_job(plan, tmp_path / "run")).summary
    c = s.clock
    assert c.pairs_error_ns == 0 and c.end_spread_median_ns == lie and c.error_ns == lie
    assert c.basis == "collective end spread (median)" and c.residual_ns == {"rank 0": 0, "rank 1": lie, "rank 2": 0}
    for col, delays in zip(s.collectives, plan.delays):
        seen = [d + (lie if r == 1 else 0) for r, d in enumerate(delays)]  # rank 1 looks late by the lie
        assert col.late_ns == max(seen) - min(seen) and col.straggler == f"rank {seen.index(max(seen))}"
        assert col.within_error == (col.late_ns <= lie)
    assert [col.within_error for col in s.collectives] == [False, False, False, True]  # the last: late by the lie exactly


def test_synthetic_steps_busy_time_and_gaps_follow_the_plan(tmp_path: Path) -> None:
    ja = analyzed(write_job(PLAN, tmp_path / "run"))
    for r, steps in enumerate(ja.summary.ranks):
        assert [x.step for x in steps.steps] == [f"step{i}" for i in range(len(PLAN.delays))]
        for i, x in enumerate(steps.steps):
            compute, arrive = PLAN.compute(i), PLAN.arrival(i, r)
            busy = sum(e - s for s, e in compute) + PLAN.end(i) - arrive  # they do not overlap in this plan
            assert (x.kernels, x.busy_ns, x.span_ns) == (4, busy, PLAN.end(i) - compute[0][0])
            assert x.largest_gap_ns == max(compute[1][0] - compute[0][1], arrive - compute[-1][1])
            assert x.start_ns == compute[0][0] - PLAN.step_start(0)  # the job's origin: the first kernel of any rank


def test_job_lanes_count_collectives_per_stream(tmp_path: Path) -> None:
    lanes = analyzed(write_job(PLAN, tmp_path / "run")).summary.lanes
    assert [(x.label, x.kernels, x.collectives) for x in lanes[:2]] == \
        [("rank 0 GPU 0 stream 7", 12, 0), ("rank 0 GPU 0 stream 13", 4, 4)]
    assert len(lanes) == 6


# ---- ranks that died ----------------------------------------------------------------------------------

def test_killed_run_markers_say_which_rank_and_how(capsys: pytest.CaptureFixture[str]) -> None:
    run = open_artifact(KILLED)
    assert isinstance(run, JobRun)
    procs = {p.label: p for p in run.processes}
    assert procs["rank 1"].ending is Ending.UNFINISHED and procs["rank 1"].outcome is Outcome.NO_TRACE
    assert procs["rank 0"].outcome is Outcome.NO_TRACE and procs["rank 0"].clock.spread_ns is None
    agent = procs["pid 2652"]
    assert (agent.ending, agent.exit, agent.outcome) == (Ending.EXITED, 1, Outcome.NO_TRACE)
    assert "ChildFailedError" in agent.how and "vm-2652.sqlite is missing" in agent.note


@pytest.mark.parametrize("flags", [[], ["--json"], ["--fail-on-unordered"], ["--pairs", "all"]])
def test_a_job_without_any_trace_fails_closed(capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    """No process left a trace: nothing was judged, so no verdict (never ordered, never clean)."""
    with pytest.raises(TraceFormatError, match="no process of the job left a trace with kernels"):
        analyzed(KILLED)
    assert main(["trace", "analyze", str(KILLED), *flags]) == 6
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "rank 0 no trace, rank 1 no trace, pid 2652 no trace" in captured.err and "unknown" in captured.err


def _gloo_rank0_with_killed_rank1(run: Path) -> Path:
    """Rank 0 of the real job as it exited, rank 1 as the killed run left it (a start marker only)."""
    (run / "procs").mkdir(parents=True)
    for name in ("vm-2580-r0.json", "vm-2580-r0.sqlite"):
        shutil.copy(GLOO / "procs" / name, run / "procs" / name)
    shutil.copy(KILLED / "procs" / "vm-2677-r1.json", run / "procs" / "vm-2677-r1.json")
    return run


def test_the_other_ranks_are_analysed_when_one_died(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _gloo_rank0_with_killed_rank1(tmp_path / "run")
    ja = analyzed(run)
    assert [(p.label, p.outcome) for p in ja.job.processes] == [("rank 0", Outcome.COMPLETE), ("rank 1", Outcome.NO_TRACE)]
    assert ja.analyses[0] is not None and ja.analyses[0].to_json()["kernels"] == 71 and ja.analyses[1] is None
    assert [r.process for r in ja.summary.ranks] == ["rank 0"]
    assert main(["trace", "analyze", str(run)]) == 0
    out = capsys.readouterr().out
    assert "== rank 0 (vm-2580-r0) ==" in out and "not analysed, verdicts UNKNOWN: rank 1" in out
    assert main(["trace", "analyze", str(run), "--fail-on-hazard"]) == 1
    err = capsys.readouterr().err
    assert "rank 1: no trace" in err and err.count("\n") == 1


def test_one_busy_rank_in_trace_sqlite_is_still_a_job(tmp_path: Path) -> None:
    """`trace run` moves the only trace with kernels to RUN/trace.sqlite (and its marker to
    process.json): with a second rank's marker the run is a job, so the dead rank is not forgotten."""
    run = _gloo_rank0_with_killed_rank1(tmp_path / "run")
    (run / "procs" / "vm-2580-r0.sqlite").rename(run / "trace.sqlite")
    shutil.copy(run / "procs" / "vm-2580-r0.json", run / "process.json")
    ja = analyzed(run)
    assert ja.job.processes[0].trace_path == run / "trace.sqlite" and len(ja.job.traces[0].kernels) == 71
    assert [p.label for p in ja.incomplete] == ["rank 1"]


def test_single_process_run_with_its_marker_is_a_trace_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "procs").mkdir(parents=True)
    shutil.copy(GLOO / "procs" / "vm-2580-r0.sqlite", run / "trace.sqlite")
    shutil.copy(GLOO / "procs" / "vm-2556.json", run / "procs" / "vm-2556.json")
    shutil.copy(GLOO / "procs" / "vm-2580-r0.json", run / "procs" / "vm-2580-r0.json")
    assert not is_job_dir(run) and isinstance(open_artifact(run), TraceRun)


def test_partial_traces_are_analysed_and_named(tmp_path: Path) -> None:
    run = write_job(PLAN, tmp_path / "run")
    m = json.loads((run / "procs" / "node-2001-r1.json").read_text())
    m.update(state="died", partial="the process died before exiting: records up to its last flush (every 2 s)")
    (run / "procs" / "node-2001-r1.json").write_text(json.dumps(m))
    ja = analyzed(run)
    p = ja.job.processes[1]
    assert (p.ending, p.outcome, p.how) == (Ending.DIED, Outcome.PARTIAL, "died without exiting (SIGKILL or a crash)")
    assert ja.analyses[1] is not None and ja.incomplete_lines()[0].startswith("rank 1 (node-2001-r1): PARTIAL")
    assert "rank 1: trace is partial (died without exiting (SIGKILL or a crash)): its ordering and hazards are unknown" \
        in ja.failures(True, False)


def test_trace_metadata_marks_a_trace_partial_whatever_the_marker_says(tmp_path: Path) -> None:
    from tests.trace_synthetic import TraceBuilder

    run = tmp_path / "run"
    (run / "procs").mkdir(parents=True)
    for r in range(2):
        b = TraceBuilder()
        b.launch(7)
        b.write(run / "procs" / f"n-{10 + r}-r{r}.sqlite", meta={"TRACER_PARTIAL": "salvaged"} if r else None)
        (run / "procs" / f"n-{10 + r}-r{r}.json").write_text(json.dumps(
            {"pid": 10 + r, "host": "n", "rank": r, "state": "exited", "clock_start": [0, 5], "trace": f"n-{10 + r}-r{r}.sqlite"}))
    ja = analyzed(run)
    assert [p.outcome for p in ja.job.processes] == [Outcome.COMPLETE, Outcome.PARTIAL]
    assert ja.job.processes[1].note == "salvaged"


def test_a_dead_rank_leaves_no_straggler_to_tell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_job(Plan(PLAN.offsets[:2], tuple(d[:2] for d in PLAN.delays)), tmp_path / "run", without_trace=(1,))
    ja = analyzed(run)
    assert ja.summary.collectives == () and ja.summary.collectives_per_process == {"rank 0": 4}
    assert main(["trace", "analyze", str(run)]) == 0
    assert "one process ran collectives: no straggler to tell" in capsys.readouterr().out


@pytest.mark.parametrize("edit,message", [
    (lambda m: m.update(state="zombie"), "state 'zombie' is not one of exited, died, running"),
    (lambda m: m.update(rank="0"), "rank must be an integer or null, not '0'"),
    (lambda m: m.update(clock_start=[1, 2, 3]), "clock_start must be [cupti_ns, unix_ns]"),
    (lambda m: m.clear(), None),
])
def test_a_bad_marker_is_a_one_line_format_error(tmp_path: Path, edit, message: str | None,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = write_job(PLAN, tmp_path / "run")
    path = run / "procs" / "node-2000-r0.json"
    m = json.loads(path.read_text())
    edit(m)
    path.write_text(json.dumps(m) if m else "[1, 2")
    with pytest.raises(TraceFormatError, match=str(path.name)):
        read_processes(run)
    assert main(["trace", "analyze", str(run)]) == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and (message is None or message in err)


# ---- commands: JSON contract, exit codes, pictures, exports -------------------------------------------

def test_job_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_job(PLAN, tmp_path / "run")
    assert main(["trace", "analyze", str(run), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"source", "kind", "pair_spec", "kernels", "pair_counts", "complete", "incomplete", "job", "analyses",
            "notes"} <= set(data) and data["kind"] == "job" and data["kernels"] == 48 and data["complete"] is True
    job = data["job"]
    assert set(job) == {"processes", "untraced", "origin_unix_ns", "lanes", "ranks", "collectives", "stragglers", "clock"}
    assert {"label", "file", "pid", "rank", "local_rank", "host", "ending", "exit", "signal", "how", "outcome", "kernels",
            "trace", "note", "clock_offset_ns"} <= set(job["processes"][0])
    assert job["ranks"][0]["steps"][0].keys() == {"step", "kernels", "start_ns", "span_ns", "busy_ns", "largest_gap_ns"}
    listed = job["collectives"]["listed"][0]
    assert listed["straggler"] == "rank 1" and listed["late_ns"] == 300_000 and len(listed["calls"]) == 3
    assert job["collectives"]["per_process"] == {"rank 0": 4, "rank 1": 4, "rank 2": 4}
    assert job["stragglers"]["rank 0"] == {"last": 2, "late_median_ns": 272_500, "late_max_ns": 500_000}
    assert {"offsets_ns", "pairs_error_ns", "end_spread_median_ns", "residual_ns", "error_ns", "basis", "time_base"} <= \
        set(job["clock"])
    assert [a["process"] for a in data["analyses"]] == ["rank 0", "rank 1", "rank 2"]
    assert data["analyses"][0]["pair_counts"]["unordered"] == data["pair_counts"]["unordered"] // 3 > 0


def test_a_job_verdict_json_gives_its_pairs_back(tmp_path: Path) -> None:
    run = write_job(PLAN, tmp_path / "run")
    spec = PairSpec(PairMode.GLOBS, (("step0", "step1"),))
    (run / "verdict.json").write_text(json.dumps(analyzed(run, spec).to_json()))
    again = open_artifact(run)
    assert isinstance(again, JobRun) and again.pair_spec == spec
    assert again.analyze(again.pair_spec).analyses[0].pair_spec == spec


def test_fail_flags_consider_every_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_job(PLAN, tmp_path / "run")
    assert main(["trace", "analyze", str(run)]) == 0
    capsys.readouterr()
    assert main(["trace", "analyze", str(run), "--fail-on-unordered"]) == 1
    err = capsys.readouterr().err
    unordered = (len(PLAN.delays) - 1) * COMPUTE  # each collective against the next step's compute: no event back
    assert all(f"rank {r}: {unordered} producer -> consumer pair(s) are UNORDERED" in err for r in range(3))
    assert main(["trace", "analyze", str(run), "--pairs", "nomatch*:step*"]) == 2
    assert "rank 0 (node-2000-r0): " in capsys.readouterr().err
    assert main(["trace", "import", str(run)]) == 6
    assert "holds a multi-process job (procs/), not a trace" in capsys.readouterr().err


def test_job_timeline_lanes_labels_and_aligned_times(tmp_path: Path) -> None:
    from tracer.views.plots.timeline import draw_timeline
    from tracer.views.timeline_layout import timeline_data

    ja = analyzed(write_job(PLAN, tmp_path / "run"))
    d = timeline_data(ja, window=(0, 40_000))
    assert [x.label for x in d.lanes] == [f"rank {r} GPU 0 stream {s} ({n} kernels)" for r in range(3)
                                          for s, n in ((COMPUTE_STREAM, 12), (NCCL_STREAM, 4))]
    assert [x.label for x in d.range_lanes] == [f"rank {r} CPU thread {2000 + r} NVTX" for r in range(3)]
    t0 = PLAN.step_start(0)
    for r in range(3):
        assert d.lanes[2 * r + 1].start_us.tolist() == [(PLAN.arrival(s, r) - t0) / 1e3 for s in range(4)]
    assert "clocks aligned, error 0.0 us" in d.subtitle and d.time_from.startswith("the first GPU operation of any process")
    assert len(d.categories) == 2 and any(c.startswith("ncclDevKernel_AllReduce") for c in d.categories)
    fig = draw_timeline(d)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[3:] == [x.label for x in d.lanes]


def test_job_pictures_exports_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_job(PLAN, tmp_path / "run")
    assert main(["plot", "stream-timeline", str(run), "-o", str(tmp_path / "t.png")]) == 0
    assert "6 stream lanes, 3 NVTX lanes" in capsys.readouterr().out
    assert main(["plot", "stream-timeline", str(GLOO), "-o", str(tmp_path / "g.png")]) == 0
    assert main(["plot", "stream-timeline", str(run), "--window", "900ms:901ms", "-o", str(tmp_path / "x.png")]) == 2
    assert "first GPU operation of any process" in capsys.readouterr().err
    assert main(["trace", "export", "--perfetto", str(run), "-o", str(tmp_path / "p.json")]) == 0
    events = json.loads((tmp_path / "p.json").read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {1: "rank 0 (node-2000-r0)", 2: "rank 1 (node-2001-r1)", 3: "rank 2 (node-2002-r2)"}
    nccl = sorted((e["pid"], e["ts"]) for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
    first = min(e["ts"] for e in events if "ts" in e)
    t0 = PLAN.step_start(0) - 500_000  # the first NVTX range starts half a millisecond before the first kernel
    assert first == 0 and nccl == sorted((r + 1, (PLAN.arrival(s, r) - t0) / 1e3) for r in range(3) for s in range(4))
    flows = [e["id"] for e in events if e.get("ph") == "s"]
    assert len(flows) == len(set(flows)) == 12
    died = _gloo_rank0_with_killed_rank1(tmp_path / "died")
    assert main(["report", str(run), str(died), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "stream timeline: run" in html and "JOB INCOMPLETE: died" in html and "per rank and step" in html
    assert main(["report", str(KILLED), "-o", str(tmp_path / "k.html")]) == 6  # nothing to report but an error
    assert not (tmp_path / "k.html").exists()


def test_synthetic_trace_marker_helpers_agree(tmp_path: Path) -> None:
    """The planned marker's pairs hold the planned offset (the oracle of the tests above)."""
    m = marker(PLAN, 1, rank_trace(PLAN, 1, tmp_path / "t.sqlite"))
    assert {u - c for c, u in (m["clock_start"], m["clock_end"])} == {PLAN.offsets[1]}


def _rehost(run: Path, stem: str, host: str) -> None:
    path = run / "procs" / f"{stem}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "host": host}))


def test_clock_error_is_unknown_where_nothing_can_vouch_for_it(tmp_path: Path) -> None:
    gloo = tmp_path / "gloo"
    shutil.copytree(GLOO, gloo)
    _rehost(gloo, "vm-2581-r1", "vm2")  # two hosts, no collective: the pairs cannot tie their wall clocks
    c = analyzed(gloo).summary.clock
    assert c.error_ns is None and c.basis.startswith("unknown: several hosts") and c.pairs_error_ns == 5227
    assert [p.label for p in analyzed(gloo).job.processes] == ["rank 0", "rank 1", "pid 2556@vm"]
    nccl = write_job(PLAN, tmp_path / "nccl")
    _rehost(nccl, "node-2001-r1", "other")  # with collectives, their ends say how well the hosts agree
    c = analyzed(nccl).summary.clock
    assert (c.error_ns, c.basis) == (0, "collective end spread (median)") and "several hosts" in c.notes[0]
    one = _gloo_rank0_with_killed_rank1(tmp_path / "one")
    m = json.loads((one / "procs" / "vm-2580-r0.json").read_text())
    del m["clock_end"]
    (one / "procs" / "vm-2580-r0.json").write_text(json.dumps(m))
    c = analyzed(one).summary.clock
    assert c.error_ns is None and c.pair_spread_ns == {"rank 0": None} and "one clock pair" in c.notes[0]


NCCL_FIXTURE = DATA / "jobs" / "ddp_nccl_2ranks"


@pytest.mark.skipif(not (NCCL_FIXTURE / "procs").is_dir(),
                    reason=f"{NCCL_FIXTURE} not captured yet (torchrun DDP on 2 GPUs: see its README once collected)")
def test_real_nccl_job_collectives_end_together_on_their_own_streams() -> None:
    from tracer.views.timeline_layout import event_edges

    ja = analyzed(NCCL_FIXTURE)
    s = ja.summary
    assert len(s.collectives_per_process) == 2 and len(set(s.collectives_per_process.values())) == 1
    ops = [c.op for c in s.collectives]
    assert ops.count("AllReduce") >= 3 and set(ops) <= {"AllReduce", "Broadcast", "AllGather"}, ops  # one per step at least, and DDP's set-up
    for p, a in zip(ja.job.processes, ja.analyses):
        if a is None or p.rank is None:
            continue
        lanes = [x for x in s.lanes if x.process == p.label]
        nccl = {x.stream for x in lanes if x.collectives}
        compute = max(lanes, key=lambda x: x.kernels - x.collectives).stream
        assert nccl and compute not in nccl  # the collectives run on their own stream(s)
        e = event_edges(a)
        assert any(int(w) in nccl for w in e.wait_stream) and any(int(r) in nccl for r in e.record_stream)
    c = s.clock
    assert c.basis and c.error_ns is not None and c.end_spread_median_ns is not None
    assert c.end_spread_median_ns < 100_000  # ends of one all-reduce within 0.1 ms on one host


KILLED_FIXTURE = DATA / "jobs" / "ddp_nccl_killed"


def test_real_killed_rank_partial_and_sigtermed_rank_complete() -> None:
    """torchrun over NCCL on 2 H200s, rank 1 SIGKILLed mid-step: its partial trace (what the flushes
    delivered) and rank 0's trace (written when torchrun SIGTERMed it) are both analysed."""
    ja = analyzed(KILLED_FIXTURE)
    by = {p.label: p for p in ja.job.processes}
    assert by["rank 1"].outcome.value == "partial" and by["rank 0"].outcome.value == "complete"
    kernels = {p.label: len(a.trace.kernels) for p, a in zip(ja.job.processes, ja.analyses) if a is not None}
    assert kernels["rank 1"] > 0 and kernels["rank 0"] > kernels["rank 1"], kernels
