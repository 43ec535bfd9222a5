"""Sanitizer verdicts that fail closed: truncated, empty or malformed XML, exit 86 with no record,
totals the records do not account for, XML without its text, and files that are not sanitizer
output. Through `sanitize import` on real outputs (tests/data/sanitizer) and through `tracer
sanitize` with a fake compute-sanitizer on PATH that leaves such outputs behind."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import fake_tools
from tests.conftest import DATA
from tracer.cli import main

UNF = DATA / "sanitizer" / "unfiltered-1024"
FIL = DATA / "sanitizer" / "filtered-128"
EMPTY_XML, CLEAN_TEXT = fake_tools.EMPTY_XML, fake_tools.CLEAN_TEXT


def _import(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    code = main(["sanitize", "import", *argv, "--json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out)["runs"][0] if out.out.strip() else None), out.err


def _pair(tmp_path: Path, stem: Path, xml: bytes | None = None, log_suffix: str | None = ".log") -> Path:
    """A copy of a real XML (or the given bytes) with its text log beside it under another suffix."""
    dst = tmp_path / stem.name
    dst.with_suffix(".xml").write_bytes(stem.with_suffix(".xml").read_bytes() if xml is None else xml)
    if log_suffix:
        shutil.copyfile(stem.with_suffix(".log"), dst.with_suffix(log_suffix))
    return dst.with_suffix(".xml")


# -- sanitize import ---------------------------------------------------------------------------

def test_control_the_real_clean_pair_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, run, _ = _import(capsys, str(_pair(tmp_path, UNF / "synccheck-clean")))
    assert code == 0 and run["verdict"] == "clean" and not run["incomplete"]


@pytest.mark.parametrize("cut", ["half", "empty", "garbage"])
def test_truncated_empty_or_malformed_xml_is_never_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str], cut: str) -> None:
    data = (UNF / "memcheck-clean.xml").read_bytes()  # 34 records, all suppressed: clean when whole
    bad = {"half": data[: len(data) // 2], "empty": b"", "garbage": data[:5000] + b"<<<&&& not xml"}[cut]
    code, run, err = _import(capsys, str(_pair(tmp_path, UNF / "memcheck-clean", bad)))
    assert code == 1, err
    assert run["verdict"] == "incomplete" and run["incomplete"]


def test_xml_without_text_output_is_no_errors_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The segfaulting target's XML is the empty one a clean run writes: without the text the
    target's failure cannot be seen, so it is not called clean."""
    xml = _pair(tmp_path, UNF / "initcheck-crash", log_suffix=None)
    code, run, _ = _import(capsys, str(xml))
    assert code == 1 and run["verdict"] == "no-errors-recorded"
    assert any("target's exit" in n for n in run["notes"])


def test_text_beside_the_xml_as_txt_and_through_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crash = _pair(tmp_path, UNF / "initcheck-crash", log_suffix=".txt")
    code, run, _ = _import(capsys, str(crash))
    assert code == 1 and run["verdict"] == "target-failed"
    elsewhere = tmp_path / "logs"
    elsewhere.mkdir()
    xml = _pair(tmp_path, UNF / "synccheck-clean", log_suffix=None)
    log = shutil.copyfile(UNF / "synccheck-clean.log", elsewhere / "out.log")
    code, run, _ = _import(capsys, str(xml), "--log", str(log))
    assert code == 0 and run["verdict"] == "clean" and run["files"]["log"] == str(log)


@pytest.mark.parametrize("what", ["readme", "report", "empty-log", "binary"])
def test_files_that_are_not_sanitizer_output_are_exit_6(tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str) -> None:
    root = Path(__file__).resolve().parent.parent
    path = {"readme": root / "README.md", "report": root / "tracer" / "data" / "demo" / "sanitize" / "report.json",
            "empty-log": tmp_path / "memcheck.log", "binary": tmp_path / "x.log"}[what]
    if what == "empty-log":
        path.write_bytes(b"")
    if what == "binary":
        path.write_bytes(bytes(range(256)) * 10)
    code = main(["sanitize", "import", str(path)])
    err = capsys.readouterr().err
    assert code == 6 and "not compute-sanitizer output" in err and err.count("\n") == 1


def test_a_log_given_with_a_foreign_file_is_exit_6(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    xml = _pair(tmp_path, UNF / "synccheck-clean", log_suffix=None)
    readme = Path(__file__).resolve().parent.parent / "README.md"
    assert main(["sanitize", "import", str(xml), "--log", str(readme)]) == 6
    assert "not compute-sanitizer output" in capsys.readouterr().err


@pytest.mark.parametrize("summary,tool", [
    ("========= LEAK SUMMARY: 1024 bytes leaked in 2 allocations\n========= ERROR SUMMARY: 2 errors\n", "memcheck"),
    ("========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n", "racecheck"),
])
def test_totals_the_records_do_not_account_for_are_a_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              summary: str, tool: str) -> None:
    log = tmp_path / f"{tool}-x.log"
    log.write_text("========= COMPUTE-SANITIZER\nsome unparsed record text\n" + summary)
    code, run, _ = _import(capsys, str(log))
    assert code == 1 and run["verdict"] == "errors" and run["incomplete"]
    assert sum(f["count"] for f in run["findings"]) == 2


def test_a_text_log_without_its_summary_is_incomplete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "synccheck-cut.log"
    log.write_text("========= COMPUTE-SANITIZER\nthe target printed this, then the log ends\n")
    code, run, _ = _import(capsys, str(log))
    assert code == 1 and run["verdict"] == "incomplete"


def test_unprinted_racecheck_hazards_are_counted() -> None:
    from tracer.sanitize.runner import import_outputs
    from tracer.sanitize.suppress import DEFAULT_FILE, load_rules

    run = import_outputs(FIL / "racecheck-hazard-planted_race.xml", None, load_rules(DEFAULT_FILE))
    assert run.verdict.value == "errors" and run.incomplete  # 20 hazards displayed of 65280 counted
    assert sum(f.count for f in run.findings) == 65280


# -- tracer sanitize with a fake compute-sanitizer -------------------------------------------------

@pytest.fixture
def fake_sanitizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from tracer import gpu

    bin_dir, cfg = fake_tools.install(tmp_path)
    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    for key, value in fake_tools.environ(bin_dir, cfg).items():
        monkeypatch.setenv(key, value)
    return lambda **kw: fake_tools.configure(cfg, **kw)


def _sanitize(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict | None, str]:
    out = tmp_path / "out"
    code = main(["sanitize", "--tool", "synccheck", "-o", str(out), "--json", *extra, "--", "python", "target.py"])
    io = capsys.readouterr()
    runs = json.loads(io.out)["runs"] if io.out.strip() else None
    return code, runs[0] if runs else None, io.err


def test_fake_control_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_sanitizer) -> None:
    fake_sanitizer(xml=EMPTY_XML, text=CLEAN_TEXT, exit=0)
    code, run, err = _sanitize(tmp_path, capsys)
    assert code == 0 and run["verdict"] == "clean", err


@pytest.mark.parametrize("case,kw", [
    ("truncated xml", {"xml": EMPTY_XML[:50], "text": CLEAN_TEXT, "exit": 0}),
    ("empty xml", {"xml": "", "text": CLEAN_TEXT, "exit": 0}),
    ("malformed xml", {"xml": '<?xml version="1.0"?>\n<ComputeSanitizerOutput><record><kind>Pre', "text": CLEAN_TEXT, "exit": 0}),
    ("exit 86 with no record", {"xml": EMPTY_XML, "text": CLEAN_TEXT, "exit": 86}),
    ("no text output", {"xml": EMPTY_XML, "text": "", "exit": 0}),
])
def test_fake_tool_outputs_never_give_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_sanitizer,
                                            case: str, kw: dict) -> None:
    fake_sanitizer(**kw)
    code, run, err = _sanitize(tmp_path, capsys)
    assert code == 1, (case, err)
    assert run["verdict"] == "incomplete" and run["incomplete"], (case, run)


def test_fake_counted_errors_without_records_are_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_sanitizer) -> None:
    fake_sanitizer(xml=EMPTY_XML, text="========= ERROR SUMMARY: 2 errors\n", exit=86)
    code, run, _ = _sanitize(tmp_path, capsys)
    assert code == 1 and run["verdict"] == "errors" and run["errors_found"]


def test_fake_tool_that_hangs_is_a_timeout_exit_8(tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_sanitizer,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tracer import proc

    monkeypatch.setattr(proc, "GRACE_S", 0.5)
    fake_sanitizer(hang=True)
    code, run, err = _sanitize(tmp_path, capsys, "--timeout", "1")
    assert code == 8 and run["verdict"] == "timeout", err
    assert err.strip().splitlines()[-1].startswith("tracer: error:") and "Traceback" not in err


def test_new_verdicts_draw_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The verdict matrix and JUnit know the new verdicts (JUnit counts them as errors, not passes)."""
    import xml.etree.ElementTree as ET

    from tracer.views.plots.verdicts import draw_verdicts
    from tracer.sanitize.report import to_junit
    from tracer.sanitize.runner import import_outputs
    from tracer.sanitize.suppress import DEFAULT_FILE, load_rules

    rules = load_rules(DEFAULT_FILE)
    cut = _pair(tmp_path, UNF / "memcheck-clean", (UNF / "memcheck-clean.xml").read_bytes()[:3000])
    alone = _pair(tmp_path, UNF / "synccheck-clean", log_suffix=None)
    runs = [import_outputs(cut, None, rules), import_outputs(alone, None, rules)]
    assert [r.verdict.value for r in runs] == ["incomplete", "no-errors-recorded"]
    draw_verdicts(runs)
    suite = ET.fromstring(to_junit(runs))
    assert suite.get("errors") == "2" and suite.get("failures") == "0"


def test_fake_tool_killed_by_a_signal_is_tool_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_sanitizer) -> None:
    fake_sanitizer(xml=EMPTY_XML, text=CLEAN_TEXT, signal=9)
    code, run, _ = _sanitize(tmp_path, capsys)
    assert code == 1 and run["verdict"] == "tool-failed" and run["incomplete"] and run["sanitizer_exit"] == -9


def test_runs_of_variants_keep_their_own_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_sanitizer) -> None:
    """Two variants in parallel: each run's text output has its own file (one shared name let the
    runs overwrite each other's logs: every verdict came out incomplete on the H200)."""
    fake_sanitizer(xml=EMPTY_XML, text=CLEAN_TEXT, exit=0)
    code = main(["sanitize", "--tool", "memcheck", "cast_transpose_dgrad", "--variant", "none", "--variant",
                 "device_before_atomic", "--shape", "256x256x256", "--jobs", "2", "-o", str(tmp_path / "v"), "--json"])
    runs = json.loads(capsys.readouterr().out)["runs"]
    logs = {r["workload"]: r["files"]["log"] for r in runs}
    assert code == 0 and len(set(logs.values())) == 2, logs
    assert all(w.split(".")[-1] in log for w, log in logs.items()), logs
