"""What a new user met on first use (issue 30): raw sanitizer XML into `plot verdicts` and `report`,
`sanitize import` of several files and of a folder, the doctor's install advice, `-o` into a missing
folder, the `trace analyze` text (hazards first, short names, why nothing was judged), colour and a
spinner at a terminal only, shell completion, and the LICENSE. On real outputs (tests/data, shared
fixtures); the terminal cases run tracer in a pseudo-terminal."""
from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT, SHARED
from tracer.cli import main

UNF = DATA / "sanitizer" / "unfiltered-1024"
HAZARD_TRACE = DATA / "hazards" / "reuse_no_record_stream.sqlite"
TWO_GPU = SHARED / "nsys" / "h100_2gpu_1s.sqlite"
JOB = DATA / "jobs" / "ddp_nccl_2ranks"
ESC = "\033["


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- sanitizer output ---------------------------------------------------------------------------

def test_plot_verdicts_and_report_take_raw_sanitizer_xml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    xml = [UNF / "memcheck-planted_oob.xml", UNF / "racecheck-clean.xml"]
    code, out, err = run(capsys, "plot", "verdicts", *map(str, xml), "-o", str(tmp_path / "v.png"))
    assert code == 0 and "2 runs" in out, err
    assert (tmp_path / "v.png").stat().st_size > 10_000
    code, out, err = run(capsys, "report", str(xml[0]), "-o", str(tmp_path / "r.html"))
    html = (tmp_path / "r.html").read_text()
    assert code == 0, err
    assert "memcheck-planted_oob" in html and "out of bounds write" in html


def test_sanitize_import_several_files_and_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    two = [str(UNF / "memcheck-clean.xml"), str(UNF / "synccheck-clean.xml")]
    code, out, _ = run(capsys, "sanitize", "import", *two, "--json")
    assert code == 0 and [r["workload"] for r in json.loads(out)["runs"]] == ["memcheck-clean", "synccheck-clean"]
    for name in ("memcheck-clean", "racecheck-clean"):
        for suffix in (".xml", ".log"):
            shutil.copyfile(UNF / (name + suffix), tmp_path / (name + suffix))
    code, out, _ = run(capsys, "sanitize", "import", str(tmp_path), "--json")
    runs = json.loads(out)["runs"]
    assert code == 0 and sorted(r["tool"] for r in runs) == ["memcheck", "racecheck"]
    assert all(r["verdict"] == "clean" for r in runs)


def test_sanitize_import_folder_without_xml_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("nothing")
    code, out, err = run(capsys, "sanitize", "import", str(tmp_path))
    assert code == 2 and out == ""
    assert f"{tmp_path}: a folder with no compute-sanitizer .xml file in it (found: notes.txt)" in err
    assert err.count("\n") == 1


def test_log_with_several_files_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "sanitize", "import", str(UNF / "memcheck-clean.xml"), str(UNF / "synccheck-clean.xml"),
                       "--log", str(UNF / "memcheck-clean.log"))
    assert code == 2 and "--log goes with one XML file; 2 files were given" in err


def test_extra_arguments_get_the_subcommand_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["trace", "analyze", str(HAZARD_TRACE), "extra.sqlite"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith("usage: tracer trace analyze ") and "unrecognized arguments: extra.sqlite" in err


# -- doctor, outputs ----------------------------------------------------------------------------

def test_doctor_names_the_distribution_not_another_project(capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.ncu import reader, tool

    main(["doctor", "--json"])
    text = capsys.readouterr().out + reader.INSTALL_READER + tool.GET_READER
    assert "tracer[" not in text
    assert "tracer-nsight[ncu]" in reader.INSTALL_READER and "tracer-nsight[ncu]" in tool.GET_READER


@pytest.mark.parametrize("argv", [
    ["plot", "stream-timeline", str(HAZARD_TRACE)],
    ["plot", "verdicts", str(UNF / "memcheck-clean.xml")],
    ["report", str(UNF / "memcheck-clean.xml")],
    ["trace", "export", "--perfetto", str(HAZARD_TRACE)],
], ids=["timeline", "verdicts", "report", "perfetto"])
def test_output_into_a_missing_folder_is_refused(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "missing" / "dir" / ("x.json" if "export" in argv else "x.html" if "report" in argv else "x.png")
    code, _, err = run(capsys, *argv, "-o", str(out))
    assert code == 9 and err.count("\n") == 1
    assert f"folder {out.parent} does not exist" in err
    assert not (tmp_path / "missing").exists()


# -- trace analyze text ---------------------------------------------------------------------------

def test_hazards_come_first_with_short_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "trace", "analyze", str(HAZARD_TRACE))
    lines = out.splitlines()
    assert code == 0 and lines[1].startswith("hazards: 2 ")
    assert not any(" 0 UNORDERED" in line or line == "same-stream: 0" for line in lines)
    hazard_lines = [line for line in lines if line.startswith("  reuse")]
    assert len(hazard_lines) == 2 and all(len(line) < 250 for line in hazard_lines)
    assert "vectorized_elementwise_kernel<…>" in hazard_lines[0]
    code, out, _ = run(capsys, "trace", "analyze", str(HAZARD_TRACE), "--json")
    listed = json.loads(out)["hazards"]["listed"][0]
    assert "MulFunctor<float>" in json.dumps(listed)  # the JSON keeps the full name


def test_template_names_elided_only_when_long() -> None:
    from tracer.model.names import short_name, text_name

    long = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
            "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor"
            "<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)")
    assert text_name(long) == "at::native::vectorized_elementwise_kernel<…>"
    assert short_name(long) == "vectorized_elementwise_kernel<…>"
    assert short_name("void gemm<64>(float*)") == "gemm<64>"


def test_two_gpu_export_says_why_no_pair_is_judged(capsys: pytest.CaptureFixture[str]) -> None:
    if not TWO_GPU.is_file():
        pytest.skip(f"shared fixture {TWO_GPU} not present")
    code, out, _ = run(capsys, "trace", "analyze", str(TWO_GPU))
    assert code == 0
    assert ("pairs (all kernel pairs): none to judge: pairs are judged between streams of one device, and each of the "
            "2 device(s) here ran kernels on one stream only") in out
    assert "note: 236 stream wait(s) on an event whose record is not in the trace" in out


# -- at a terminal ----------------------------------------------------------------------------------

def in_terminal(argv: list[str], env: dict[str, str] | None = None) -> str:
    """tracer's stdout and stderr when both are a pseudo-terminal."""
    main_fd, sub_fd = pty.openpty()
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full_env.pop("NO_COLOR", None) if "NO_COLOR" not in (env or {}) else None
    proc = subprocess.Popen([sys.executable, "-m", "tracer", *argv], stdout=sub_fd, stderr=sub_fd, env=full_env)
    os.close(sub_fd)
    chunks = []
    while True:
        try:
            data = os.read(main_fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(main_fd)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_at_a_terminal_only() -> None:
    text = in_terminal(["trace", "analyze", str(JOB)])
    assert ESC not in in_terminal(["trace", "analyze", str(JOB)], {"NO_COLOR": "1"})
    piped = subprocess.run([sys.executable, "-m", "tracer", "trace", "analyze", str(JOB)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    count = re.search(r"^UNORDERED: (\d+) pair", piped.stdout, re.M)
    assert piped.returncode == 0 and count and int(count.group(1)) > 0 and ESC not in piped.stdout + piped.stderr
    assert f"{ESC}1m{ESC}31mUNORDERED{ESC}0m: {count.group(1)} pair(s)" in text  # the same line, coloured


def test_colour_rules_leave_zero_counts_plain() -> None:
    from tracer.style import colour_line

    assert colour_line("pairs (all): 0 UNORDERED, 3 same-stream") == "pairs (all): 0 UNORDERED, 3 same-stream"
    assert colour_line("UNORDERED: 0 pair(s)") == "UNORDERED: 0 pair(s)"
    assert ESC in colour_line("UNORDERED: 4 pair(s)") and ESC in colour_line("hazards: 2 (RAW 2)")
    assert colour_line("hazards: 0 (RAW 0)") == "hazards: 0 (RAW 0)"


def test_spinner_only_after_its_delay(capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.progress import Spinner

    quick = Spinner("quick", after_s=5.0).start()
    quick.stop()
    assert quick.status is None
    slow = Spinner("slow", after_s=0.01).start()
    deadline = time.monotonic() + 10
    while slow.status is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert slow.status is not None
    slow.stop()
    assert slow.status is None


# -- completion, licence ------------------------------------------------------------------------------

def test_bash_completion_completes_commands_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    code, script, _ = run(capsys, "completion", "bash")
    assert code == 0
    probe = ('source /dev/stdin; COMP_WORDS=(tracer trace an); COMP_CWORD=2; _tracer_complete; echo "${COMPREPLY[@]}"; '
             'COMP_WORDS=(tracer sanitize import --js); COMP_CWORD=3; _tracer_complete; echo "${COMPREPLY[@]}"')
    res = subprocess.run(["bash", "-c", probe], input=script, capture_output=True, text=True, timeout=30)
    assert res.stdout.splitlines() == ["analyze", "--json"], res.stderr


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_name_every_command(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import COMMANDS

    code, script, _ = run(capsys, "completion", shell)
    assert code == 0 and all(f" {c}" in script or f'"{c}"' in script for c in COMMANDS)
    assert run(capsys, "completion", "tcsh")[2].strip() == "tracer: error: unknown shell 'tcsh' (allowed: bash, zsh, fish)"


def test_license_is_apache() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_demo_ends_with_what_to_do_on_ones_own_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "demo", "-o", str(tmp_path))
    tail = out.splitlines()[-6:]
    assert code == 0 and tail[0] == "next, on your own program (on a machine with an NVIDIA GPU):"
    assert any("tracer trace run --memory -- python train.py" in line for line in tail)
    assert any("tracer sanitize import memcheck.xml" in line for line in tail)
