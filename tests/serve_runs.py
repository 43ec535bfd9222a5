"""Run folders for the `tracer serve` tests, made from captured fixtures by the CLI itself:
`--memory` traces of tests/gpu/programs/raw_no_wait.py and event_ordered.py (H200) imported by
`tracer trace import`, the killed-rank DDP job of tests/data/jobs analysed by `tracer trace analyze --json`, the demo's
sanitizer selftest report and an Nsight Compute profile run."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

from tracer.cli import main

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
HAZARD_TRACE = DATA / "hazards" / "raw_no_wait.sqlite"
ORDERED_TRACE = DATA / "hazards" / "event_ordered.sqlite"
SLEEPER = "import time; time.sleep(120)"
GPU_ENV = "import os; print('on GPU', os.environ['CUDA_VISIBLE_DEVICES'])"
# Kernel and NVTX names are user data: pages must show these as text and never run them.
HOSTILE_KERNEL = '<img src=x onerror="document.body.dataset.pwned=1">'
HOSTILE_RANGE = "</td><script>document.body.dataset.pwned=1</script>"


def hostile_trace(out: Path) -> Path:
    """Two kernels with a hostile name on two streams, each in a hostile NVTX range, nothing ordering
    them (an UNORDERED pair: the names reach the pair table)."""
    from tests.trace_synthetic import TraceBuilder

    b = TraceBuilder()
    for stream in (7, 13):
        b.push(HOSTILE_RANGE)
        b.launch(stream, HOSTILE_KERNEL)
        b.pop()
    return b.write(out)


def make_runs(root: Path) -> dict[str, Path]:
    runs = {"raw": root / "traces" / "raw_no_wait", "ordered": root / "traces" / "event_ordered",
            "names": root / "traces" / "names",
            "job": root / "jobs" / "ddp_killed", "san": root / "san", "prof": root / "prof"}
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["trace", "import", str(HAZARD_TRACE), "-o", str(runs["raw"])]) == 0
        assert main(["trace", "import", str(ORDERED_TRACE), "-o", str(runs["ordered"])]) == 0
        names = hostile_trace(root.parent / f"{root.name}-names.sqlite")
        assert main(["trace", "import", str(names), "-o", str(runs["names"]), "--pairs", "all"]) == 0
    for run in (runs["raw"], runs["ordered"], runs["names"]):  # the file's name, not where this checkout is (pages and screenshots show it)
        cmd = json.loads((run / "command.json").read_text())
        cmd["imported_from"] = Path(cmd["imported_from"]).name
        (run / "command.json").write_text(json.dumps(cmd))
    with contextlib.redirect_stdout(io.StringIO()):
        shutil.copytree(DATA / "jobs" / "ddp_nccl_killed", runs["job"])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["trace", "analyze", str(runs["job"]), "--json"])
    (runs["job"] / "verdict.json").write_text(out.getvalue())
    shutil.copytree(ROOT / "tracer" / "data" / "demo" / "sanitize", runs["san"])
    runs["prof"].mkdir()
    shutil.copy(DATA / "ncu" / "variants" / "profile.json", runs["prof"] / "profile.json")
    return runs


def jobs_file(path: Path, python: str) -> Path:
    """An allow-list with the CPU workload and named commands: quick, sleeping, and two marked as GPU jobs."""
    path.write_text(
        "schema: 1\nactions: [run, trace, command]\nworkloads: [torch_composite]\ncampaigns: []\ncpu_slots: 2\n"
        f"commands:\n  hello: {{argv: [{python!r}, -c, \"print('hello from a job')\"]}}\n"
        f"  sleeper: {{argv: [{python!r}, -c, {SLEEPER!r}]}}\n"
        f"  gpu_sleeper: {{argv: [{python!r}, -c, {SLEEPER!r}], gpu: true}}\n"
        f"  gpu_env: {{argv: [{python!r}, -c, {GPU_ENV!r}], gpu: true}}\n")
    return path
