"""Work that grows with the input, not its square: memory access sets bounded per stored row (a
hostile file putting many launches on one op with many accesses is refused, not expanded), and
thousands of streams analysed in seconds. Peak memory is measured in a child process (VmHWM: unlike
ru_maxrss, not inherited from the forking test process)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trace_synthetic import TraceBuilder, fan_out, generate
from tracer.readers.memory_reader import MAX_EXPANDED_ROWS, MAX_FANOUT

ROOT = Path(__file__).resolve().parent.parent
PEAK = ("import json, re, sys, time; from pathlib import Path; t0 = time.perf_counter(); "
        "from tracer.readers.load import load_trace; from tracer.errors import TraceFormatError\n"
        "try:\n    t = load_trace(Path(sys.argv[1])); rows = len(t.memory.launches.corr) if t.memory else 0; err = ''\n"
        "except TraceFormatError as e:\n    rows, err = -1, str(e)\n"
        "hwm = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "print(json.dumps({'rss_kb': hwm, 'rows': rows, 'error': err, "
        "'s': time.perf_counter() - t0}))")


def _peak(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_one_op_with_many_launches_and_accesses_is_refused_within_bounds(tmp_path: Path) -> None:
    """3,000 launches of one op with 3,000 accesses: 9M (launch, access) rows from 6,000 stored."""
    path = fan_out(tmp_path / "fan.sqlite")
    got = _peak(path)
    assert 3000 * 3000 > max(MAX_FANOUT * 6000, MAX_EXPANDED_ROWS)
    assert got["rows"] == -1 and "3000 launches x 3000 accesses" in got["error"]
    assert got["rss_kb"] < 120_000 and got["s"] < 30  # refused before expanding (9M rows would be ~500 MB)


def test_reader_memory_per_access_row_is_bounded(tmp_path: Path) -> None:
    """Peak RSS of reading a valid memory trace, above reading a tiny one, per (launch, access) row."""
    small = generate(200, 20, 2, 4, memory=True, allocations=50).write(tmp_path / "small.sqlite", memory=True)
    big = generate(40_000, 4_000, 400, 4, memory=True, allocations=4_000).write(tmp_path / "big.sqlite", memory=True)
    base, got = _peak(small), _peak(big)
    assert got["rows"] >= 40_000
    per_row = (got["rss_kb"] - base["rss_kb"]) * 1024 / got["rows"]
    assert per_row < 1500, f"{per_row:.0f} bytes per row"


def _streams_trace(path: Path, n: int, seed: int = 0, syncs: bool = True) -> Path:
    """n streams on two devices, kernels in random order, with context, stream and event syncs and
    a few event waits when `syncs`."""
    import random
    rnd, b = random.Random(seed), TraceBuilder()
    for _ in range(8 * n):
        b.launch(100 + rnd.randrange(n), name="k", device=rnd.randrange(2))
        r = rnd.random() if syncs else 1.0
        if r < 0.03:
            b.device_sync(device=rnd.randrange(2))
        elif r < 0.05:
            b.stream_sync(100 + rnd.randrange(5))
        elif r < 0.08:
            b.wait(100 + rnd.randrange(n), b.record(100 + rnd.randrange(6)))
        elif r < 0.1:
            b.event_sync(b.record(100 + rnd.randrange(6)))
    return b.write(path)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_plain_streams_counted_at_once_match_the_stream_by_stream_loop(tmp_path: Path, seed: int) -> None:
    from tracer.analysis.analyze import all_pairs
    from tracer.analysis.attribution import attribute, join_launches
    from tracer.readers.load import load_trace
    from tracer.analysis.ordering import OrderingIndex

    t = load_trace(_streams_trace(tmp_path / "t.sqlite", 80, seed))
    index = OrderingIndex(t, *join_launches(t))
    assert 0 < int(index.plain_streams().sum()) < len(index.streams)  # both kinds present
    attr = attribute(t)
    _, loop = all_pairs(t, attr, index, few_streams=10**9)
    _, bulk = all_pairs(t, attr, index, few_streams=0)
    assert loop == bulk and loop["host-synchronized"] and loop["unordered"] and loop["event-ordered"]


def test_distinct_in_ranges_matches_a_set_count() -> None:
    import numpy as np

    from tracer.analysis.analyze import distinct_in_ranges
    rng = np.random.default_rng(0)
    v = rng.integers(0, 9, 300)
    lo, hi = rng.integers(0, 300, 500), rng.integers(0, 301, 500)
    assert distinct_in_ranges(v, lo, hi).tolist() == [len(set(v[a:b].tolist())) for a, b in zip(lo, hi)]


@pytest.mark.parametrize("case", ["plain", "chain"])
def test_ten_thousand_streams_are_analysed_and_plotted_in_seconds(tmp_path: Path, case: str) -> None:
    """10,000 streams of 2 kernels each (20,000 kernels, 10^8 kernel pairs across streams), plain or
    each waiting on an event of the one before (scripts/bench_streams.py): CPU seconds of the child,
    as wall time on a shared machine says little; the picture folds lanes."""
    import resource
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_streams import make

    path = make(10_000, case, tmp_path / "s.sqlite")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    for argv in (["trace", "analyze", str(path), "--json"], ["plot", "stream-timeline", str(path), "-o", str(tmp_path / "s.png")]):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([sys.executable, "-m", "tracer", *argv], capture_output=True, text=True, env=env, timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert out.returncode == 0, out.stderr
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        assert cpu < 10, f"{argv[:2]}: {cpu:.1f} s CPU"
        if argv[0] == "trace":
            doc = json.loads(out.stdout)
            assert len(doc["streams"]) == 10_000 and doc["pair_counts"]["unordered"] == 10_000 * 9_999
            assert doc["event_edges"] == (9_999 if case == "chain" else 0)
        else:
            assert "40 stream lanes" in out.stdout


def test_an_ablation_of_5000_variants_draws_the_most_failure_prone(tmp_path: Path) -> None:
    from tracer.campaign.stats import cell_stats
    from tracer.views.plots.ablation import MAX_SHOWN, shown_cells

    cells = [cell_stats(f"v{i}", 1 if i == 4321 else 0, 10 if i != 17 else 3) for i in range(5000)]
    shown, note = shown_cells(cells)
    assert len(shown) == MAX_SHOWN and [c.label for c in shown[:2]] == ["v17", "v4321"]  # 0/3, then 1/10: widest upper bounds
    assert "60 of 5,000 variants" in note
    src = tmp_path / "a.json"
    src.write_text(json.dumps({"variants": {c.label: {"failures": c.failures, "trials": c.trials} for c in cells}}))
    out = subprocess.run([sys.executable, "-m", "tracer", "plot", "ablation", str(src), "-o", str(tmp_path / "a.png")],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0 and "5000 variants" in out.stdout, out.stderr
