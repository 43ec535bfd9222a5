"""`tracer profile` end to end on the CPU: a stand-in ncu (a script that answers as ncu 2025.3.1
did on the H200, with the real reports of tests/data/ncu) drives the command, the runner and the
run directory; bad inputs give one line and their exit code."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.cli import main

FAKE = """#!{python}
import os, shutil, sys, time
argv = sys.argv[1:]
mode = os.environ.get("FAKE_NCU", "ok")
with open(os.environ["FAKE_NCU_ARGV"], "a") as fh:
    fh.write(repr(argv) + "\\n")
src = os.environ.get("FAKE_NCU_REPORT", "")
if argv[:1] == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
if "--import" in argv:
    sys.stdout.write(open(src[:-len(".ncu-rep")] + ".raw.csv").read())
    sys.exit(0)
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
if mode == "gvisor":
    print("==ERROR== Failed to initialize the profiler: LibraryNotLoaded")
    sys.exit(1)
if mode == "sleep":
    time.sleep(60)
if mode == "replay":  # a log ncu printed on a GPU machine, and its exit code
    sys.stdout.write(open(os.environ["FAKE_NCU_TEXT"]).read())
    sys.exit(int(os.environ.get("FAKE_NCU_EXIT", "1")))
filtered = "--kernel-name" in argv or "--nvtx-include" in argv
logs = os.environ.get("FAKE_NCU_LOGS", "")  # what ncu 2025.3.1 printed on the H200 when a regex matched nothing
if mode.startswith("nokernels") and filtered:
    text = open(os.path.join(logs, "no_kernels.tracer-ncu.log")).read()
    if mode == "nokernels-unlisted":  # an ncu that does not list the kernels that ran
        text = text.split("Available Kernels:")[0]
    sys.stdout.write(text)
    sys.exit(0)
if mode.startswith("nokernels"):
    sys.stdout.write(open(os.path.join(logs, "no_kernels.tracer-list.log")).read())
shutil.copyfile(src, argv[argv.index("--export") + 1] + ".ncu-rep")
print('==PROF== Profiling "cast_transpose": 0%....50%....100% - 18 passes')
sys.exit(int(os.environ.get("FAKE_NCU_EXIT", "0")))
"""


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    report = DATA / "ncu" / "cast_transpose_1024.ncu-rep"
    if not report.is_file():
        pytest.skip(f"{report} not captured yet")
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir()
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("TRACER_NCU", str(exe))
    monkeypatch.setenv("FAKE_NCU_ARGV", str(tmp_path / "argv.log"))
    monkeypatch.setenv("FAKE_NCU_REPORT", str(report))
    monkeypatch.setenv("FAKE_NCU_LOGS", str(DATA / "ncu" / "logs"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "argv.log"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def calls(log: Path) -> list[list[str]]:
    import ast

    return [ast.literal_eval(line) for line in log.read_text().splitlines()]


def test_workload_variants_one_ncu_run_each(fake_ncu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "profile", "cast_transpose_dgrad", "--variant", "none", "--variant", "device_before_atomic",
                         "--shape", "256x256x256", "--launch-count", "2", "-o", "prof")
    assert code == 0, err
    profiled = [c for c in calls(fake_ncu) if "--import" not in c]
    assert len(profiled) == 2
    first = profiled[0]
    tail = first[first.index("--export") + 2:]
    assert tail == [sys.executable, "-m", "tracer", "run", "cast_transpose_dgrad", "--no-fail-on-check", "--steps", "1",
                    "--variant", "none", "--shape", "256x256x256"]
    assert first[first.index("--kernel-name") + 1] == "regex:^(cast_transpose)$" and "--launch-count" in first
    assert first[first.index("--clock-control") + 1] == "none" and first[first.index("--export") + 1].endswith("none")
    run_dir = Path("prof")
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "command.json", "device_before_atomic.ncu-rep", "device_before_atomic.raw.csv", "environment.json", "logs",
        "none.ncu-rep", "none.raw.csv", "profile.json"]
    prof = json.loads((run_dir / "profile.json").read_text())
    assert [t["label"] for t in prof["targets"]] == ["none", "device_before_atomic"] and prof["clock_control"] == "none"
    assert prof["meta"]["cast_shape"] == [256, 256] and len(prof["targets"][0]["report"]["launches"]) == 2
    assert "clock control: none (not locked" in out and "against none" in out and "device_before_atomic" in out


def test_a_command_after_dashdash_and_compare_plot_import(fake_ncu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "profile", "--kernel", "axpy|gemm", "-o", "cmd", "--", "python3", "prog.py", "--n", "3")
    assert code == 0, err
    argv = calls(fake_ncu)[0]
    assert argv[argv.index("--kernel-name") + 1] == "regex:axpy|gemm" and argv[-3:] == ["prog.py", "--n", "3"]
    assert "prog: 2 launches" in out
    code, out, err = run(capsys, "profile", "compare", "cmd", "--plot", "c.png")
    assert code == 0 and Path("c.png").stat().st_size > 1000 and "medians per group" in out
    code, out, err = run(capsys, "profile", "import", "cmd/prog.ncu-rep", "-o", "imp", "--label", "none")
    assert code == 0 and sorted(p.name for p in Path("imp").iterdir()) == [
        "command.json", "profile.json", "prog.ncu-rep", "prog.raw.csv"]
    code, out, err = run(capsys, "profile", "compare", "cmd", "imp", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["baseline"] == "none" and [s["group"] for s in doc["summaries"]] == ["prog", "none"]
    assert doc["deltas"][0]["duration_pct"] == 0.0  # the same report imported: no difference


@pytest.mark.parametrize("mode,code,message", [
    ("perm", 5, "the driver lets only admin users profile (ERR_NVGPUCTRPERM)"),
    ("gvisor", 5, "Failed to initialize the profiler: LibraryNotLoaded"),
    ("nokernels", 2, "no kernel launch matched --kernel-name regex:nope (exit 0); the kernels that ran: "
                     "cast_transpose, distribution_elementwise_grid_stride_kernel, vectorized_elementwise_kernel"),
    ("nokernels-unlisted", 2, "no kernel launch matched --kernel-name regex:nope (exit 0); the kernels that ran: "
                              "distribution_elementwise_grid..., vectorized_elementwise_kernel, cast_transpose"),
])
def test_ncu_failures_are_one_line_with_exit_code(fake_ncu: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, mode: str, code: int, message: str) -> None:
    monkeypatch.setenv("FAKE_NCU", mode)
    got, _, err = run(capsys, "profile", "--kernel", "nope", "-o", "r", "--", "python3", "t.py")
    assert got == code and message in err and err.count("\n") == 1 and "Traceback" not in err
    # ncu's own list of the kernels that ran spares a second ncu run
    assert len(calls(fake_ncu)) == (2 if mode == "nokernels-unlisted" else 1)
    assert not Path("r").exists() and not any(p.name.startswith(".r.partial") for p in Path(".").iterdir())


def test_ncu_refused_the_counters_on_a_real_machine(fake_ncu: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    log = DATA / "ncu" / "logs" / "counter_permission.log"
    if not log.is_file():
        pytest.skip(f"{log} not captured yet (scripts/capture_ncu.py OUT --steps perm on a GPU machine)")
    monkeypatch.setenv("FAKE_NCU", "replay")
    monkeypatch.setenv("FAKE_NCU_TEXT", str(log))
    monkeypatch.setenv("FAKE_NCU_EXIT", (log.with_suffix(".exit")).read_text().strip())
    got, _, err = run(capsys, "profile", "cast_transpose_dgrad", "--variant", "none", "-o", "r")
    assert got == 5 and err.count("\n") == 1 and "cannot read the GPU's performance counters" in err
    assert "ERR_NVGPUCTRPERM" in err and not Path("r").exists()


def test_timeout_kills_ncu_and_leaves_nothing(fake_ncu: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NCU", "sleep")
    code, _, err = run(capsys, "profile", "--timeout", "1", "-o", "r", "--", "python3", "t.py")
    assert code == 8 and "killed at --timeout 1 s" in err and not Path("r").exists()


def test_no_ncu_says_how_to_get_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACER_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("tracer.ncu.tool.CANDIDATES", ())
    code, _, err = run(capsys, "profile", "--", "python3", "t.py")
    assert code == 5 and "ncu (Nsight Compute) not found: install Nsight Compute" in err and "TRACER_NCU" in err
    assert main(["doctor"]) == 0  # ncu is optional: a finding with its hint, not a failure
    doctor = capsys.readouterr().out
    line = next(ln for ln in doctor.splitlines() if ln.startswith("--  ncu "))
    assert "needed by profile" in line and "install Nsight Compute" in line and "TRACER_NCU=/path/to/ncu" in line
    from tracer.ncu.tool import ncu_status

    ncu, reader = ncu_status()
    assert not ncu.found and ncu.hint.startswith("install Nsight Compute") and reader.name.startswith("ncu-report")


def test_doctor_status_of_a_working_ncu(fake_ncu: Path) -> None:
    from tracer.ncu.tool import ncu_status

    ncu, _ = ncu_status()
    assert ncu.found and ncu.version == "Version 2025.3.1.0 (build 36398880) (public-release)"


@pytest.mark.parametrize("argv,code,message", [
    (["profile"], 2, "give one WORKLOAD"),
    (["profile", "cast_transpose_dgrad", "--variant", "fence"], 2, "unknown variant 'fence'"),
    (["profile", "cast_transpose_dgrad", "--section", "Roofline"], 2, "unknown section 'Roofline'"),
    (["profile", "cast_transpose_dgrad", "--launch-count", "0"], 2, "--launch-count=0 must be >= 1"),
    (["profile", "cast_transpose_dgrad", "--clock-control", "max"], 2, "unknown clock control 'max' (allowed: none, base)"),
    (["profile", "compare"], 2, "usage: tracer profile compare RUN"),
    (["profile", "compare", "no_such_run"], 6, "no profile.json"),
    (["profile", "import", "x.ncu-rep"], 6, "x.ncu-rep: no such file"),
    (["profile", "import"], 2, "usage: tracer profile import FILE"),
])
def test_user_errors(fake_ncu: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str) -> None:
    got, _, err = run(capsys, *argv)
    assert got == code and message in err and err.count("\n") == 1


def test_import_of_a_truncated_report_is_exit_6(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = DATA / "ncu" / "triton_prog.ncu-rep"
    if not src.is_file():
        pytest.skip(f"{src} not captured yet")
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(src.read_bytes()[:150_000])
    code, _, err = run(capsys, "profile", "import", str(bad), "-o", str(tmp_path / "r"))
    assert code == 6 and "truncated: block" in err and err.count("\n") == 1 and not (tmp_path / "r").exists()


def test_compare_sass_side_by_side(fake_ncu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.errors import TracerError
    from tracer.kernel.disasm import find_tool

    try:
        find_tool("nvdisasm")
    except TracerError as exc:
        pytest.skip(f"nvdisasm is not available here ({exc})")
    code, _, err = run(capsys, "profile", "cast_transpose_dgrad", "--variant", "none", "--variant", "device_before_atomic",
                       "--shape", "1024x1024x1024", "-o", "prof")
    assert code == 0, err
    code, out, err = run(capsys, "profile", "compare", "prof", "--sass", "none", "device_before_atomic")
    assert code == 0, err
    assert "none vs device_before_atomic:" in out and "duration us" in out
    assert "SASS (sm_90, bf16 -> e4m3, config" in out and "the heuristic's pick for 1024x1024 on 132 SMs" in out
    assert "fences: MEMBAR" in out and "opcode stream:" in out
