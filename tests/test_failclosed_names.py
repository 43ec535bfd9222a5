"""Names from the traced program reach terminals and pictures escaped, never as what they would do:
control characters (ESC, CR, newline, the other C0 and C1), bidi overrides, line separators and
lone surrogates show as `\\x1b`, `\\n`, `\\u202e`; a newline in a kernel name cannot forge a
verdict line; matplotlib draws `$\\frac{$` as text; an SVG with NUL in a name parses as XML; JSON
keeps the raw names. stdout on a full device is exit 9 in one line; PYTHONIOENCODING=ascii writes
backslash escapes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.dom.minidom
from pathlib import Path
from typing import IO

import pytest

from tracer.cli import main
from tracer.textsafe import drawn, lines_text, shown, shown_text

ROOT = Path(__file__).resolve().parent.parent
EVIL = {  # each class: what it would do raw, and how it is shown
    "esc": ("\x1b[2J", "\\x1b[2J"), "cr": ("a\rb", "a\\rb"), "newline": ("a\nUNORDERED: 0 pair(s)", "a\\nUNORDERED: 0 pair(s)"),
    "nul": ("a\x00b", "a\\x00b"), "bell": ("\x07", "\\x07"), "del": ("\x7f", "\\u007f"), "csi-c1": ("\x9b2J", "\\u009b2J"),
    "bidi-rlo": ("abc\u202edcba", "abc\\u202edcba"), "bidi-isolate": ("\u2067x\u2069", "\\u2067x\\u2069"),
    "line-separator": ("a\u2028b", "a\\u2028b"), "surrogate": ("k\ud800", "k\\ud800"), "tab": ("a\tb", "a\\tb"),
}


@pytest.mark.parametrize("kind", sorted(EVIL))
def test_every_class_of_hostile_character_is_shown_escaped(kind: str) -> None:
    raw, want = EVIL[kind]
    assert shown(raw) == want
    assert shown(shown(raw)) == want  # escaping twice changes nothing: views may nest
    assert all(ch.isprintable() for ch in shown(raw))


def test_ordinary_names_are_untouched() -> None:
    for name in ("void at::native::vectorized_elementwise_kernel<4, float>(int, float*)", "step0/forward", "café ∑ 核",
                 "C:\\path\\to", "$x$", "a b"):
        assert shown(name) == name
    assert drawn("$\\frac{$") == "\\$\\frac{\\$"
    assert shown_text("line 1\nline\x1b 2\tx") == "line 1\nline\\x1b 2\tx"
    assert lines_text(["a\nb", "c"]) == "a\\nb\nc"


def _kineto(tmp_path: Path, names: list[str]) -> Path:
    """A Kineto trace: one NVTX range and one kernel per name, each on its own stream, none ordered."""
    events = []
    for i, name in enumerate(names):
        events += [{"ph": "X", "cat": "user_annotation", "name": f"step0/{name}", "pid": 1, "tid": 1, "ts": i * 100, "dur": 90},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": i * 100 + 10,
                    "dur": 5, "args": {"correlation": i + 1}},
                   {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7 + i, "ts": i * 100 + 20, "dur": 10,
                    "args": {"device": 0, "stream": 7 + i, "correlation": i + 1}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


ALL_EVIL = [raw for raw, _ in EVIL.values()] + ["$\\frac{$", "$$", "k$\\sqrt{"]


def test_no_hostile_name_reaches_the_terminal_raw(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _kineto(tmp_path, ALL_EVIL)
    assert main(["trace", "analyze", str(trace)]) == 0
    out, err = capsys.readouterr()
    text = out + err
    assert not any(ch in text for ch in "\x1b\r\x00\x07\x7f\x9b\u202e\u2067\u2028\ud800")
    assert [ln for ln in out.splitlines() if ln.startswith("UNORDERED")] == [ln for ln in out.splitlines()
                                                                           if ln.startswith("UNORDERED: ") and "nothing orders" in ln]
    assert "a\\nUNORDERED: 0 pair(s)" in out


def test_json_keeps_the_raw_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _kineto(tmp_path, ["a\x1b[2J\nb", "c\u202ed"])
    assert main(["trace", "analyze", str(trace), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = json.dumps(data)
    assert "a\\u001b[2J\\nb" in names and "c\\u202ed" in names


def test_an_error_naming_a_hostile_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["trace", "analyze", str(tmp_path / "x\n\x1b[2Jtracer: clean.sqlite")])
    err = capsys.readouterr().err
    assert code == 6 and err.count("\n") == 1 and "\x1b" not in err and "\\n\\x1b[2J" in err


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_pictures_draw_mathtext_and_control_characters_as_text(tmp_path: Path, suffix: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    trace = _kineto(tmp_path, ALL_EVIL)
    out = tmp_path / f"t{suffix}"
    assert main(["plot", "stream-timeline", str(trace), "-o", str(out)]) == 0, capsys.readouterr().err
    if suffix == ".svg":
        xml.dom.minidom.parse(str(out))  # NUL and the rest escaped: the SVG is XML
    ablation = tmp_path / "a.json"
    ablation.write_text(json.dumps({"variants": {name: {"trials": 4, "failures": i % 2} for i, name in enumerate(ALL_EVIL)}}))
    assert main(["plot", "ablation", str(ablation), "-o", str(tmp_path / f"a{suffix}")]) == 0, capsys.readouterr().err
    if suffix == ".svg":
        xml.dom.minidom.parse(str(tmp_path / "a.svg"))
    assert main(["report", str(trace), str(ablation), "-o", str(tmp_path / "r.html")]) == 0, capsys.readouterr().err


def test_verdict_plot_with_hostile_workload_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.artifact import open_sanitize

    demo = ROOT / "tracer" / "data" / "demo" / "sanitize" / "report.json"
    data = json.loads(demo.read_text())
    for i, run in enumerate(data["runs"]):
        run["workload"] = ALL_EVIL[i % len(ALL_EVIL)]
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps(data))
    assert open_sanitize(bad).runs
    assert main(["plot", "verdicts", str(bad), "-o", str(tmp_path / "v.svg")]) == 0, capsys.readouterr().err
    xml.dom.minidom.parse(str(tmp_path / "v.svg"))
    assert main(["sanitize", "import", str(bad)]) in (0, 1, 6)


def _tracer(*argv: str, env: dict[str, str] | None = None, stdout: int | IO[str] = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "tracer", *argv], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=300, env=full)


def test_non_ascii_names_under_an_ascii_terminal(tmp_path: Path) -> None:
    trace = _kineto(tmp_path, ["café_kernel", "核"])
    res = _tracer("trace", "analyze", str(trace), env={"PYTHONIOENCODING": "ascii"})
    assert res.returncode == 0, res.stderr
    assert "caf\\xe9_kernel" in res.stdout and "\\u6838" in res.stdout and "Traceback" not in res.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_stdout_on_a_full_device_is_exit_9_in_one_line() -> None:
    demo = ROOT / "tracer" / "data" / "demo" / "linear_backward_planted.sqlite"
    with open("/dev/full", "w") as full:
        res = _tracer("trace", "analyze", str(demo), stdout=full)
    assert res.returncode == 9 and res.stderr.count("\n") == 1 and "standard output" in res.stderr, res.stderr
