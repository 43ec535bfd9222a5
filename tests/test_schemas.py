"""The JSON contracts: every JSON tracer writes (verdict, job, sanitize, profile, doctor) validates
against the JSON Schema shipped for it in tracer/data/schemas, made by tracer from real captures
(tests/data, the shared nsys fixtures); and a schema is strict enough to refuse a document that
lost a field, gained an unknown one or holds a verdict word tracer does not write."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import DATA, SHARED
from tracer.cli import main
from tracer.schemas import KINDS, VERSION, schema_file

UNF = DATA / "sanitizer" / "unfiltered-1024"


def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_file(kind).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def output(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    main(list(argv))
    return json.loads(capsys.readouterr().out)


def assert_valid(kind: str, doc: dict) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(kind).iter_errors(doc)]
    assert not errors, errors[:5]
    assert doc["schema"] == VERSION


def test_every_kind_has_a_schema_file() -> None:
    for kind in KINDS:
        assert schema_file(kind).is_file()
        assert json.loads(schema_file(kind).read_text())["properties"]["schema"] == {
            "const": VERSION, "description": json.loads(schema_file(kind).read_text())["properties"]["schema"]["description"]}


@pytest.mark.parametrize("argv", [
    ["hazards/reuse_no_record_stream.sqlite"],
    ["hazards/planted_cross_stream.sqlite", "--pairs", "all"],
    ["traces/cast_transpose_dgrad.sqlite"],
    ["traces/event_ordered_dgrad.sqlite", "--pairs", "*/cast_transpose:*/dgrad"],
    ["traces/planted_cross_stream.sqlite", "--no-hazards"],
], ids=["hazards", "hazards-all-pairs", "nsys-all", "globs", "no-hazards"])
def test_verdicts_of_real_traces(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    doc = output(capsys, "trace", "analyze", str(DATA / argv[0]), *argv[1:], "--json")
    assert doc["kind"] == "verdict"
    assert_valid("verdict", doc)


def test_verdict_of_a_foreign_two_gpu_export(capsys: pytest.CaptureFixture[str]) -> None:
    path = SHARED / "nsys" / "h100_2gpu_1s.sqlite"
    if not path.is_file():
        pytest.skip(f"shared fixture {path} not present")
    assert_valid("verdict", output(capsys, "trace", "analyze", str(path), "--json"))


@pytest.mark.parametrize("job", ["ddp_nccl_2ranks", "ddp_nccl_killed", "ddp_gloo_2ranks"])
def test_jobs(job: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = output(capsys, "trace", "analyze", str(DATA / "jobs" / job), "--json")
    assert doc["kind"] == "job"
    assert_valid("job", doc)


def test_trace_import_writes_a_valid_verdict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "import", str(DATA / "hazards" / "war.sqlite"), "-o", str(tmp_path / "run")]) == 0
    assert_valid("verdict", json.loads((tmp_path / "run" / "verdict.json").read_text()))


@pytest.mark.parametrize("folder", ["unfiltered-1024", "filtered-128"])
def test_sanitize_reports(folder: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = output(capsys, "sanitize", "import", str(DATA / "sanitizer" / folder), "--json")
    assert doc["kind"] == "sanitize" and len(doc["runs"]) > 5
    assert_valid("sanitize", doc)


def test_shipped_demo_report_and_profile_fixtures() -> None:
    from tracer.resources import DEMO_DIR

    assert_valid("sanitize", json.loads((DEMO_DIR / "sanitize" / "report.json").read_text()))
    profiles = sorted((DATA / "ncu").glob("*/profile.json"))
    assert len(profiles) == 4
    for p in profiles:
        assert_valid("profile", json.loads(p.read_text()))


def test_profile_import_writes_a_valid_profile_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "import", str(DATA / "ncu" / "cast_transpose_1024.raw.csv"), "-o", str(tmp_path / "p")]) == 0
    assert_valid("profile", json.loads((tmp_path / "p" / "profile.json").read_text()))


def test_doctor(capsys: pytest.CaptureFixture[str]) -> None:
    assert_valid("doctor", output(capsys, "doctor", "--json"))


def test_schemas_refuse_what_tracer_does_not_write(capsys: pytest.CaptureFixture[str]) -> None:
    doc = output(capsys, "trace", "analyze", str(DATA / "traces" / "event_ordered_dgrad.sqlite"), "--pairs",
                 "*/cast_transpose:*/dgrad", "--json")
    v = validator("verdict")
    assert not list(v.iter_errors(doc))
    assert list(v.iter_errors({k: x for k, x in doc.items() if k != "pair_counts"}))  # a field lost
    assert list(v.iter_errors(doc | {"surprise": 1}))  # an unknown field
    assert list(v.iter_errors(doc | {"schema": 2}))
    bad = json.loads(json.dumps(doc))
    bad["pairs"][0]["verdict"] = "probably-fine"
    assert list(v.iter_errors(bad))
    san = output(capsys, "sanitize", "import", str(UNF / "memcheck-clean.xml"), "--json")
    san["runs"][0]["verdict"] = "passed"
    assert list(validator("sanitize").iter_errors(san))
