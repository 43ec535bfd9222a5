"""scripts/device_capture_summary.py, the last step of the device script, on what a killed-rank
job leaves (made here with the fake backend): each section prints, a section that fails prints
one line and the others still print (on the H200 a misplaced parenthesis crashed the whole
summary after its first section)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from tracer.capture.launcher import capture_run
from tracer.capture.options import CaptureOptions

ROOT = Path(__file__).resolve().parent.parent
RANKS = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    RANK = ("import os, signal, time\\n"
            "from tracer.capture.session import current\\n"
            "current().backend.fake_kernel('allreduce')\\n"
            "time.sleep(0.6)\\n"
            "if os.environ['RANK'] == '1':\\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\\n")
    ranks = [subprocess.Popen([sys.executable, "-c", RANK], env=os.environ | {"RANK": str(r), "WORLD_SIZE": "2"})
             for r in range(2)]
    sys.exit(1 if any(p.wait() for p in ranks) else 0)
""")
LOG = """W1130 torch/distributed/elastic: Sending process 783 closing signal SIGTERM
run directory: /tmp/capture-runs/ddp-killed (backend cupti, target exit 1)
processes (3):
  h-707                        process    exited 1                                   no CUDA use, nothing to trace
  h-783-r0                     rank 0     stopped by SIGTERM                         complete trace, 81 kernels
  h-784-r1                     rank 1     died without exiting (SIGKILL or a crash)  PARTIAL trace, 40 kernels
tracer: error: the traced command exited 1; 1 process(es) died before writing their trace: h-784-r1
"""


def device_out(tmp_path: Path) -> Path:
    """OUT as scripts/device_capture.sh leaves it after its ddp-killed step, plus a broken bench."""
    prog = tmp_path / "ranks.py"
    prog.write_text(RANKS)
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    res = capture_run([sys.executable, str(prog)], run, run / "logs", 120,
                      options=replace(CaptureOptions(backend="fake", lazy=False), flush_s=0.1))
    out = tmp_path / "out"
    folder = out / "traces" / "ddp-killed"
    folder.mkdir(parents=True)
    for f in [*(run / "procs").glob("*.json"), *(run / "procs").glob("*.sqlite")]:
        shutil.copy(f, folder)
    (folder / "command.json").write_text(json.dumps({"exit": res.proc.returncode} | res.command_fields()))
    (out / "logs").mkdir()
    (out / "logs" / "ddp-killed.log").write_text(LOG)
    (out / "logs" / "exits.txt").write_text("ddp-killed 7\nbench 0\n")
    (out / "bench_memory_capture.json").write_text(json.dumps({"runs": [{"mode": "cupti"}]}))  # a run without its times
    return out


def test_the_summary_prints_every_section_and_one_line_for_a_broken_one(tmp_path: Path) -> None:
    out = device_out(tmp_path)
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "device_capture_summary.py"), str(out)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    text = res.stdout
    assert "Traceback" not in res.stderr + text and res.returncode == 1, res.stderr
    assert "== torchrun ddp-killed" in text and "== torchrun DDP overhead" in text and "no DDP benchmark result" in text
    assert "rank 1     died" in text and "partial" in text  # the killed rank, from command.json
    assert "processes (3): | h-707" in text and "h-784-r1 rank 1 died without exiting" in " ".join(text.split())
    assert text.count("SUMMARY ERROR") == 1 and "SUMMARY ERROR in capture overhead" in text
    assert "== steps with a non-zero exit: {'ddp-killed': '7'}" in text
