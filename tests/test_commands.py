"""Commands over the reading layer (#18, #13, #14): a crashed target fails `trace run`, workload
options reach the traced child, `--filter both` without a filter is refused, empty campaign cells
say so, exit codes for tracer's own crash and a closed pipe, help and readable output."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import fake_tools
from tests.conftest import DATA
from tracer import gpu
from tracer.cli import build_parser, main, with_default_action
from tracer.proc import ProcResult

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "tracer" / "data" / "demo"
TRACE = DATA / "traces" / "planted_cross_stream.sqlite"


def _fake_capture(monkeypatch: pytest.MonkeyPatch, exit_code: int) -> None:
    """The capture step replaced by a real H200 capture copied into place, with the target's exit code."""
    import tracer.app.trace_run as record

    def capture(req, run_dir: Path, logs: Path):
        shutil.copyfile(TRACE, run_dir / "trace.sqlite")
        for name in ("stdout.log", "stderr.log"):
            (logs / name).write_text("")
        return ProcResult(argv=("fake",), returncode=exit_code, timed_out=False, seconds=0.1, stdout_path=logs / "stdout.log",
                          stderr_path=logs / "stderr.log"), None

    monkeypatch.setattr(record, "_capture", capture)
    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    monkeypatch.setattr(record, "choose_backend", lambda name: "cupti")


@pytest.mark.parametrize("exit_code,expected", [(0, 0), (3, 7), (-11, 7)])
def test_a_crashed_target_fails_trace_run_but_its_trace_is_analysed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], exit_code: int, expected: int) -> None:
    _fake_capture(monkeypatch, exit_code)
    out = tmp_path / "run"
    assert main(["trace", "run", "-o", str(out), "--pairs", "*/cast_transpose:*/dgrad", "--", "python", "t.py"]) == expected
    captured = capsys.readouterr()
    assert "UNORDERED" in captured.out  # analysed and printed all the same
    assert (out / "verdict.json").is_file() and (out / "trace.sqlite").is_file()
    if expected:
        assert captured.err.count("\n") == 2  # the run directory line, then one error line
        assert "the traced command" in captured.err and str(out) in captured.err
        assert ("signal 11" if exit_code < 0 else "exited 3") in captured.err


def test_every_workload_option_reaches_the_traced_child() -> None:
    """`trace run W --opt V` runs `tracer run W --opt V` for every workload option (none dropped)."""
    from tracer.cliargs import WORKLOAD_OPTIONS, workload_argv

    values = {"--variant": "device_before_atomic", "--config": "8/8", "--shape": "64x64x64", "--steps": "2", "--seed": "5",
              "--layers": "3", "--microbatches": "2", "--checkpointing": None}
    assert set(values) == {flag for flag, _ in WORKLOAD_OPTIONS}, "a new workload option needs a value here"
    given = [x for flag, v in values.items() for x in ([flag] if v is None else [flag, v])]
    parser = build_parser()
    traced = parser.parse_args(["trace", "run", "cast_transpose_dgrad", *given])
    child = parser.parse_args(["run", "cast_transpose_dgrad", *workload_argv(traced)])
    for flag, _ in WORKLOAD_OPTIONS:
        dest = flag[2:].replace("-", "_")
        assert getattr(child, dest) == getattr(traced, dest) is not None, flag
    no_ckpt = parser.parse_args(["trace", "run", "cast_transpose_dgrad", "--no-checkpointing"])
    assert workload_argv(no_ckpt) == ["--no-checkpointing"]


def test_filter_both_without_a_kernel_filter_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.errors import UsageError
    from tracer.sanitize.plan import plan

    with pytest.raises(UsageError, match="--filter both"):
        plan(None, ["python", "train.py"], mode="both")
    assert main(["sanitize", "--filter", "both", "--", "python", "train.py"]) == 2
    assert "use --filter off, or give --only-kernel NAME" in capsys.readouterr().err
    on = plan(None, ["python", "train.py"], mode="on")  # on without a filter: one run, labelled for what it is
    assert [f.label for f in on[0].filters] == ["off"]
    both = plan("cast_transpose_dgrad", [], mode="both")  # its profile has a filter: two different runs
    assert [(f.label, bool(f.include)) for f in both[0].filters] == [("on", True), ("off", False)]


@pytest.fixture
def empty_store(tmp_path: Path) -> Path:
    """A store of the cpu_smoke campaign before any trial ran."""
    from tracer.campaign.executors import open_store
    from tracer.campaign.grid import load_campaign

    path = tmp_path / "c.sqlite"
    open_store(load_campaign("cpu_smoke"), path).close()
    return path


def test_a_cell_without_trials_says_no_trials(empty_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tracer.artifact import CampaignRun, open_artifact

    run = open_artifact(empty_store)
    assert isinstance(run, CampaignRun) and run.cells == () and run.empty == ("none", "device_before_atomic")
    assert main(["campaign", "report", str(empty_store)]) == 0
    text = capsys.readouterr().out
    assert text.count("no trials") == 2 and "0/1" not in text
    assert main(["campaign", "report", str(empty_store), "--json"]) == 0
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert [(c["trials"], "rate" in c) for c in cells] == [(0, False), (0, False)]
    assert main(["report", str(empty_store), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert html.count("<td>no trials</td>") == 2 and "0/1" not in html


def test_campaign_commands_refuse_a_trace_and_leave_it_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.sqlite"
    shutil.copyfile(TRACE, trace)
    before = hashlib.sha256(trace.read_bytes()).hexdigest()
    for action in ("report", "status"):
        assert main(["campaign", action, str(trace)]) == 6
        assert "not a campaign store" in capsys.readouterr().err
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == before


def test_tracer_s_own_crash_is_exit_70_with_a_log(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import tracer.commands.kernels as kernels

    def boom(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(kernels, "cmd_list", boom)
    assert main(["kernels", "list"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "ZeroDivisionError: a bug" in err
    log = Path(err.split("traceback in ")[1].split(" ")[0])
    assert log.parent == Path(tempfile.gettempdir()) and "raise ZeroDivisionError" in log.read_text()
    log.unlink()
    assert main(["--debug", "kernels", "list"]) == 70
    assert "Traceback (most recent call last)" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["trace", "analyze", str(TRACE), "--pairs", "all"], ["kernels", "list"]])
def test_a_closed_pipe_ends_quietly(argv: list[str]) -> None:
    """`tracer ... | head`: the reader goes away; no BrokenPipeError, exit 141 (128 + SIGPIPE)."""
    proc = subprocess.Popen([sys.executable, "-m", "tracer", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == ""


def test_sanitize_actions_and_the_default_action(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert with_default_action(parser, ["sanitize", "cast_transpose_dgrad"]) == ["sanitize", "run", "cast_transpose_dgrad"]
    assert with_default_action(parser, ["sanitize", "--tool", "memcheck"]) == ["sanitize", "run", "--tool", "memcheck"]
    assert with_default_action(parser, ["sanitize", "import", "x.xml"]) == ["sanitize", "import", "x.xml"]
    assert with_default_action(parser, ["--debug", "trace", "analyze", "x"]) == ["--debug", "trace", "analyze", "x"]
    for action, own in (("import", "FILE.xml (and FILE.log or .txt)"), ("selftest", "with the profiles' kernel filters")):
        with pytest.raises(SystemExit):
            main(["sanitize", action, "--help"])
        assert own in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["kernels", "ptx", "--help"])
    assert "planted_barrier" in capsys.readouterr().out


def test_no_option_without_help() -> None:
    import argparse

    stack = [build_parser()]
    while stack:
        p = stack.pop()
        if p.prog == "tracer doctor":  # doctor's options are the wheel helper's (#14)
            continue
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += action.choices.values()
            elif action.dest != "help" and action.help is None:
                raise AssertionError(f"{p.prog} {'/'.join(action.option_strings) or action.dest} has no help text")


def test_text_and_html_are_free_of_python_reprs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "analyze", str(TRACE), "--pairs", "all"]) == 0  # `all` goes alone (order's PairSpec)
    out = capsys.readouterr().out
    assert "{'" not in out and "['" not in out and len(out.splitlines()) <= 40
    assert out.splitlines()[1].startswith("pairs (all kernel pairs): ") and out.splitlines()[2].startswith("UNORDERED: ")
    run = tmp_path / "run"  # a run directory: the report analyses it with the pairs its verdict.json names
    assert main(["trace", "import", str(TRACE), "-o", str(run), "--pairs", "all"]) == 0
    assert main(["report", str(run), str(DEMO / "sanitize"), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "{'" not in html and "{&#x27;" not in html and "pairs: {" not in html
    verdicts = html.split("ordering verdicts")[1].split("</table>")[0]
    cells = [row.split("<td>")[4].split("</td>")[0] for row in verdicts.split("<tr class=")[1:]]
    assert cells and cells[0] == "UNORDERED" and cells == sorted(cells, key=lambda v: v != "UNORDERED")


def test_demo_writes_outside_the_source_tree_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    wrote = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("wrote "))
    out = Path(wrote.split(" to ")[1].split("/ (open")[0])
    try:
        assert out.parent == Path(tempfile.gettempdir()) and (out / "report.html").stat().st_size > 1000
        assert ROOT not in out.parents
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.mark.parametrize("argv", [["trace", "run", "--backend", "nsys", "--", "python", "t.py"],
                                  ["sanitize", "--tool", "memcheck", "--", "python", "t.py"]])
def test_captures_say_no_gpu_before_anything_about_their_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Where the driver sees no GPU, trace run and sanitize exit 4 in one line (nothing about nsys or
    compute-sanitizer, which PATH here does not hold), and leave no run directory."""
    monkeypatch.setattr(gpu, "probe", lambda: gpu.GpuProbe(0, "the NVIDIA driver sees no device"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU is visible" in err and "nsys" not in err and "sanitizer" not in err
    assert not (tmp_path / "runs").exists()


def test_report_shows_a_profile_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An Nsight Compute run directory (imported from the H200 report's raw CSV export) is an artifact
    of its own: the report draws its stall chart and lists its medians."""
    from tracer.artifact import NcuRun, open_artifact

    src = DATA / "ncu" / "cast_transpose_1024.raw.csv"
    run = tmp_path / "prof"
    assert main(["profile", "import", str(src), "-o", str(run), "--label", "none"]) == 0
    assert isinstance(open_artifact(run), NcuRun) and isinstance(open_artifact(run / "profile.json"), NcuRun)
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "Nsight Compute per variant: prof" in html and "stall that grew most" in html
    assert html.count("data:image/png;base64,") == 1
    capsys.readouterr()
    assert main(["plot", "verdicts", str(run), "-o", str(tmp_path / "v.png")]) == 6  # not a sanitizer report
    assert "holds an Nsight Compute profile run, not a sanitizer report" in capsys.readouterr().err
