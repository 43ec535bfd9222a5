"""Work that grows with the input, not its square: memory access sets bounded per stored row (a
hostile file putting many launches on one op with many accesses is refused, not expanded), and
thousands of streams analysed in seconds. Peak memory is measured in a child process (VmHWM: unlike
ru_maxrss, not inherited from the forking test process)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


from tests.trace_synthetic import TraceBuilder, generate
from tracer.trace.memory import MAX_EXPANDED_ROWS, MAX_FANOUT

ROOT = Path(__file__).resolve().parent.parent
PEAK = ("import json, re, sys, time; from pathlib import Path; t0 = time.perf_counter(); "
        "from tracer.trace.load import load_trace; from tracer.errors import TraceFormatError\n"
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
    b = TraceBuilder()
    op = b.op("aten::_foreach_add_")
    for i in range(3000):
        b.access(op, 0x1000_0000 + i * 256, 256, 3)
    for _ in range(3000):
        b.launch(7, "multi_tensor_apply_kernel", op=op)
    path = b.write(tmp_path / "fan.sqlite", memory=True)
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
