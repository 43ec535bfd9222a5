"""The README is a front page: under 200 lines, its two set-up commands first and unchanged (CI and
the guide rely on them), its first screen (40 lines) says what tracer is, how to install it and how
to run it on one's own program; every tracer command in it is one the parser accepts, and the ones
under "Try it now, no GPU needed" run here on the checked-in captures with the outcome it states."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tracer.cli import build_parser, parse, with_default_action

README = (ROOT / "README.md").read_text()
LINES = README.splitlines()
SETUP = ["# tracer", "", "```bash",
         "bash scripts/setup.sh && .venv/bin/tracer quickstart   # install, then the main job: the seed workload traced on "
         "a GPU box; `tracer demo` on sample data where there is no GPU (it says so)",
         "bash scripts/setup.sh && .venv/bin/python -m pytest -q  # install, then the tests (GPU tests skip with a reason "
         "where there is no GPU)", "```"]


def commands(text: str) -> list[str]:
    """`tracer ...` lines of the bash blocks, without their comments."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    out = []
    for block in blocks:
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("tracer "):
                out.append(line.split("  #")[0].strip())
    return out


def section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_front_page_shape() -> None:
    assert len(LINES) < 200
    assert LINES[:6] == SETUP
    first = "\n".join(LINES[:40])
    assert "pip install" in first and "tracer-nsight" in first
    assert "-- python train.py" in first and "tracer trace run --memory" in first
    assert "happens-before" in first


def test_links_point_at_files_that_exist() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


@pytest.mark.parametrize("command", commands(README))
def test_every_command_parses(command: str) -> None:
    words = shlex.split(command)[1:]
    words = words[:words.index("--")] if "--" in words else words
    parser = build_parser()
    assert callable(parse(parser, with_default_action(parser, words)).func)


TRY = commands(section("Try it now, no GPU needed"))
EXPECTED = {  # what the README says each shows, and its exit code (1: a sanitizer run not clean)
    "planted_cross_stream": (0, "hazards: 10 (RAW 6"),
    "event_ordered_dgrad": (0, "2 event-ordered"),
    "ddp_nccl_killed": (0, "rank 1 (vm-773-r1): PARTIAL"),
    "memcheck-planted_oob": (1, "target-failed"),
    "stream-timeline": (0, "wrote "),
}


@pytest.mark.parametrize("command", TRY)
def test_cpu_commands_run_as_stated(command: str, tmp_path: Path) -> None:
    words = shlex.split(command)[1:]
    if "-o" in words:
        words[words.index("-o") + 1] = str(tmp_path / Path(words[words.index("-o") + 1]).name)
    code, text = next(v for k, v in EXPECTED.items() if k in command)
    res = subprocess.run([sys.executable, "-m", "tracer", *words], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode == code, res.stderr[-2000:]
    assert text in res.stdout, res.stdout[:2000]


def test_all_try_commands_are_checked() -> None:
    assert len(TRY) == 5 and all(any(k in c for k in EXPECTED) for c in TRY)
