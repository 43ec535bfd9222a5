"""Start-up: `tracer --help` and the commands that read captures (trace analyze, sanitize import,
plot) import none of torch, cuda.core, scipy, rich, nor matplotlib outside plots: each costs
start-up time on every call, and everything after capture must run without GPU libraries.
Nor does a command import tracer's own modules its path does not use (other commands', the job
reader for a single trace, numpy where nothing numerical is read).
Each case runs in a fresh interpreter, where sys.modules shows what the command pulled in.
(How long start-up takes is measured by scripts/bench_startup.py, not here.)"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "traces" / "cast_transpose_dgrad.sqlite"
SANITIZER_XML = ROOT / "tests" / "data" / "sanitizer" / "unfiltered-1024" / "memcheck-clean.xml"
HEAVY = ("torch", "cuda.core", "scipy", "matplotlib", "rich")
PROBE = """
import json, sys
from tracer.cli import main
try:
    rc = main(json.loads(sys.argv[1]))
except SystemExit as exc:  # --help
    rc = exc.code
with open(sys.argv[2], "w") as f:
    json.dump({"rc": rc, "modules": sorted(sys.modules)}, f)
"""


def _modules(argv: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    """(exit code, every module in sys.modules) of `tracer ARGV` in a fresh interpreter."""
    out = tmp_path / "probe.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), str(out)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.is_file(), res.stderr[-2000:]
    got = json.loads(out.read_text())
    return got["rc"], set(got["modules"])


def _imported(argv: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    rc, modules = _modules(argv, tmp_path)
    return rc, set(HEAVY) & modules


def _under(modules: set[str], prefixes: tuple[str, ...]) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)}


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["trace", "--help"],
    ["trace", "analyze", str(TRACE)],
    ["sanitize", "import", str(SANITIZER_XML)],
], ids=["help", "trace-help", "trace-analyze", "sanitize-import"])
def test_reading_commands_import_no_heavy_module(argv: list[str], tmp_path: Path) -> None:
    rc, heavy = _imported(argv, tmp_path)
    assert rc == 0
    assert heavy == set(), f"tracer {' '.join(argv[:2])} imported {sorted(heavy)}"


def test_plot_imports_matplotlib_only(tmp_path: Path) -> None:
    rc, heavy = _imported(["plot", "stream-timeline", str(TRACE), "-o", str(tmp_path / "t.png")], tmp_path)
    assert rc == 0 and (tmp_path / "t.png").stat().st_size > 0
    assert heavy == {"matplotlib"}


# What each path has no use for. A single nsys SQLite trace with no memory tables: no job reader or
# summary, no Nsight Compute, Kineto, sanitizer or kernel code, and of the campaign only the schema
# (a campaign store is SQLite too: sniffing tells the two apart).
OTHER_COMMANDS = tuple(f"tracer.commands.{c}" for c in ("quickstart", "kernels", "run", "sanitize", "profile", "campaign",
                                                        "plot", "report", "serve", "doctor"))
# Nor, without memory tables, the memory reader and model (issue 27: their records cost start-up), the
# thread pool the hazard search uses, numpy.ma (numpy imports it on the first plain np.unique), nor
# what only an error needs (difflib's closest names, a crash's traceback).
NOT_FOR_ONE_TRACE = ("tracer.readers.job", "tracer.analysis.job_summary", "tracer.ncu", "tracer.readers.kineto_reader",
                     "tracer.sanitize", "tracer.kernel", "tracer.campaign.trials_db", "tracer.campaign.stats",
                     "tracer.campaign.report", "tracer.app.trace_run", "tracer.workloads", *OTHER_COMMANDS,
                     "tracer.readers.memory_reader", "tracer.model.memory", "concurrent.futures", "numpy.ma", "difflib", "traceback")
NOT_FOR_SANITIZER_OUTPUT = ("numpy", "tracer.readers", "tracer.model", "tracer.analysis", "tracer.artifact", "tracer.kernel",
                            "tracer.campaign", "tracer.ncu", "tracer.commands.trace", "tracer.commands.kernels", "tracer.commands.plot")


@pytest.mark.parametrize("argv, unused", [
    (["--help"], ("numpy", "tracer.artifact", "tracer.model.trace", "tracer.kernel.compile")),
    (["trace", "analyze", str(TRACE)], NOT_FOR_ONE_TRACE),
    (["sanitize", "import", str(SANITIZER_XML)], NOT_FOR_SANITIZER_OUTPUT),
], ids=["help", "trace-analyze", "sanitize-import"])
def test_commands_import_only_what_their_path_uses(argv: list[str], unused: tuple[str, ...], tmp_path: Path) -> None:
    rc, modules = _modules(argv, tmp_path)
    assert rc == 0
    assert _under(modules, unused) == set(), f"tracer {' '.join(argv[:2])} imported modules it does not use"


MEMORY_TRACE = ROOT / "tests" / "data" / "hazards" / "graph_no_wait.sqlite"  # memory tables, a hazard, a CUDA graph


@pytest.mark.parametrize("extra", [[], ["--pairs", "all", "--explain"]], ids=["default", "pairs-all-explain"])
def test_analyze_imports_no_numpy_ma(extra: list[str], tmp_path: Path) -> None:
    """numpy.ma (about 19 ms) stays out of `trace analyze`, with memory tables too: the analysis
    takes sorted distinct values from tracer.model.arrays, not from a plain np.unique."""
    for trace in (TRACE, MEMORY_TRACE):
        rc, modules = _modules(["trace", "analyze", str(trace), *extra], tmp_path)
        assert rc in (0, 1), f"tracer trace analyze {trace.name} exited {rc}"
        assert "numpy" in modules and "numpy.ma" not in modules, f"{trace.name}: numpy.ma imported"
        if trace == MEMORY_TRACE:  # the lazy imports do load the memory reader where the tables are
            assert {"tracer.readers.memory_reader", "tracer.model.memory"} <= modules
