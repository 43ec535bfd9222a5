"""The reading layer: what a path holds, from a bounded head, opened as typed data."""
from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer import artifact
from tracer.artifact import CampaignRun, SanitizeRun, TraceRun, open_artifact
from tracer.errors import TraceFormatError
from tracer.analysis.pairs import PairSpec

DEMO = Path(__file__).resolve().parent.parent / "tracer" / "data" / "demo"
TRACE = DATA / "traces" / "cast_transpose_dgrad.sqlite"


def test_each_kind_is_recognised(tmp_path: Path) -> None:
    from tracer.cli import main

    run = tmp_path / "run"
    assert main(["trace", "import", str(TRACE), "-o", str(run), "--pairs", "*/cast_transpose:*/dgrad"]) == 0
    opened = open_artifact(run)
    assert isinstance(opened, TraceRun) and opened.run_dir == run and opened.trace_file == run / "trace.sqlite"
    assert opened.pair_spec == PairSpec("globs", (("*/cast_transpose", "*/dgrad"),))
    plain = open_artifact(TRACE)
    assert isinstance(plain, TraceRun) and plain.pair_spec is None and len(plain.load().kernels) > 0
    for path in (DEMO / "sanitize", DEMO / "sanitize" / "report.json"):
        assert isinstance(open_artifact(path), SanitizeRun)
    ablation = open_artifact(DEMO / "campaign.json")
    assert isinstance(ablation, CampaignRun) and not ablation.store and len(ablation.cells) == 9


@pytest.mark.parametrize("value,expected", [
    ("none", PairSpec("none")), ("all", PairSpec("all")),
    ("*/cast_transpose:*/dgrad, */cast_transpose:*/wgrad",
     PairSpec("globs", (("*/cast_transpose", "*/dgrad"), ("*/cast_transpose", "*/wgrad")))),
    ({"mode": "globs", "globs": [["a::k*", "b"]]}, PairSpec("globs", (("a::k*", "b"),))),
    ({"mode": "all", "globs": []}, PairSpec("all")),
])
def test_pair_specs_old_and_structured(value: object, expected: PairSpec) -> None:
    assert PairSpec.from_json(value) == expected
    assert PairSpec.from_json(expected.to_json()) == expected


@pytest.mark.parametrize("value", ["a:b:c", {"mode": "some"}, 3, "a, b", {"mode": "globs", "globs": [["a"]]}])
def test_a_bad_pair_spec_is_a_format_error(value: object) -> None:
    with pytest.raises(TraceFormatError, match="pair_spec"):
        PairSpec.from_json(value)


def test_sanitizer_report_round_trips_into_dataclasses() -> None:
    from tracer.sanitize.model import Tool, ToolRun
    from tracer.sanitize.runner import import_outputs
    from tracer.sanitize.suppress import DEFAULT_FILE, load_rules

    run = import_outputs(DATA / "sanitizer" / "unfiltered-1024" / "memcheck-clean.xml", None, load_rules(DEFAULT_FILE))
    assert run.suppressed and run.tool is Tool.MEMCHECK
    assert ToolRun.from_json(json.loads(json.dumps(run.to_json()))) == run
    demo = open_artifact(DEMO / "sanitize")
    assert isinstance(demo, SanitizeRun) and {r.tool for r in demo.runs} == set(Tool)


def test_the_head_is_all_that_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON bigger than the head is recognised from its first 64 KiB (a Kineto trace can be GBs)."""
    big = tmp_path / "big.json"
    big.write_text('{"schemaVersion": 1, "traceEvents": [' + ",".join(['{"ph": "X"}'] * 200_000) + "]}")
    read: list[int] = []

    class Counting:
        def __init__(self, fh) -> None:
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

        def read(self, n: int = -1) -> bytes:
            data = self.fh.read(n)
            read.append(len(data))
            return data

    monkeypatch.setattr(artifact, "open", lambda *a, **k: Counting(builtins.open(*a, **k)), raising=False)
    assert artifact.sniff(big) is artifact.Kind.TRACE
    assert big.stat().st_size > 20 * artifact.HEAD_BYTES and sum(read) <= artifact.HEAD_BYTES


@pytest.mark.parametrize("content,kind", [('{"variants": {"a": {"trials": 3, "failures": 1}}}', artifact.Kind.CAMPAIGN),
                                          ('{"tracer": "0.1", "runs": []}', artifact.Kind.SANITIZE),
                                          ('{"traceEvents": []}', artifact.Kind.TRACE)])
def test_small_json_by_its_keys(tmp_path: Path, content: str, kind: artifact.Kind) -> None:
    p = tmp_path / "x.json"
    p.write_text(content)
    assert artifact.sniff(p) is kind


def test_what_is_not_an_artifact(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="not a run directory"):
        open_artifact(tmp_path)
    with pytest.raises(TraceFormatError, match="no such file"):
        open_artifact(tmp_path / "nope.sqlite")
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"\0" * 10)
    with pytest.raises(TraceFormatError, match="exported to SQLite"):
        open_artifact(rep)
    bad = tmp_path / "report.json"
    for text, message in (('{"runs": [{"tool": "memcheck"}]}', "not a tracer sanitize report"),
                          ('{"runs": []}', "with no runs"), ("[1]", "not an object")):
        bad.write_text(text)
        with pytest.raises(TraceFormatError, match=message):
            open_artifact(bad) if text != "[1]" else artifact.open_sanitize(bad)
    ablation = tmp_path / "a.json"
    ablation.write_text('{"variants": {"none": {"trials": 3, "failures": 5}}}')
    with pytest.raises(TraceFormatError, match="failures outside"):
        open_artifact(ablation)
