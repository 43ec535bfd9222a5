"""The JSON contracts: every JSON tracer writes validates against the JSON Schema shipped for it in
tracer/data/schemas, made by tracer from real captures (tests/data, the shared nsys fixtures), and
a schema is strict enough to refuse a document that lost a field, gained an unknown one or holds a
verdict word tracer does not write. The documents of the run directories (command.json,
environment.json) come from real `trace run`s on the fake backend (the bootstrap, markers and
process tree are real; tests/gpu validates those of CUPTI runs), from `trace import` and
`profile import`, and from `tracer sanitize` with a fake compute-sanitizer. With
TRACER_SCHEMA_SAMPLES=DIR every document validated is also written there, by kind, for
scripts/draft_schema.py."""
from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import DATA, SHARED
from tracer.cli import main
from tracer.schemas import FILES, KINDS, PROFILE_KIND, schema_file, version

UNF = DATA / "sanitizer" / "unfiltered-1024"
SAMPLES = os.environ.get("TRACER_SCHEMA_SAMPLES")
_sample_ids = itertools.count()


def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_file(kind).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def output(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    main(list(argv))
    return json.loads(capsys.readouterr().out)


def assert_valid(kind: str, doc: dict) -> None:
    kind = PROFILE_KIND if kind == "profile" else kind
    if SAMPLES:
        folder = Path(SAMPLES) / kind
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{next(_sample_ids)}.json").write_text(json.dumps(doc, indent=1))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(kind).iter_errors(doc)]
    assert not errors, errors[:5]
    assert doc["schema"] == version(kind) and doc["kind"] == kind


def test_every_kind_has_a_schema_file() -> None:
    assert len(set(FILES.values())) == len(KINDS)
    for kind in KINDS:
        schema = json.loads(schema_file(kind).read_text())
        assert schema["$id"] == f"tracer/{FILES[kind]}.schema.json"
        assert schema["properties"]["schema"]["const"] == version(kind)
        assert schema["properties"]["kind"] == {"const": kind}
        assert {"schema", "kind"} <= set(schema["required"]) and schema["additionalProperties"] is False
    shipped = {p.name for p in schema_file("verdict").parent.glob("*.schema.json")}
    # no file left without a kind, but the process marker's (a record of tracer/format/marker.py, no `kind`)
    assert shipped == {f"{f}.schema.json" for f in FILES.values()} | {"marker.schema.json"}


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


# ---- the run directories' own files: command.json and environment.json -------------------------

ONE_KERNEL = "from tracer.capture.session import current\ncurrent().backend.fake_kernel('k')\n"


@pytest.mark.parametrize("script", ["one", "ranks"])
def test_trace_run_writes_valid_command_environment_and_verdict(script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_capture_session import RANKS, fake_cli

    argv, run = fake_cli(monkeypatch, tmp_path, ONE_KERNEL if script == "one" else RANKS)
    code = main(argv)
    assert code == (0 if script == "one" else 7), capsys.readouterr().err  # a rank was killed: the target failed
    command = json.loads((run / "command.json").read_text())
    assert_valid("command", command)
    assert command["backend"] == "cupti" and len(command["processes"]) == (1 if script == "one" else 3)
    assert_valid("environment", json.loads((run / "environment.json").read_text()))
    verdict = json.loads((run / "verdict.json").read_text())
    assert_valid("verdict" if script == "one" else "job", verdict)


def test_verdict_of_an_nsys_trace_run(capsys: pytest.CaptureFixture[str]) -> None:
    """`trace run --backend nsys` adds the run's fields to the analysis, with no untraced list (nsys
    traces the whole process tree; the H200 run writes it: tests/gpu/test_nsys_gpu.py)."""
    from tracer.app.trace_run import untraced_json

    doc = output(capsys, "trace", "analyze", str(DATA / "traces" / "cast_transpose_dgrad.sqlite"), "--json")
    doc |= {"target_exit": 0, "partial": False, "stopped": None, "ending": [], "untraced": untraced_json(None)}
    assert doc["untraced"] is None
    assert_valid("verdict", doc)


def test_imports_write_a_valid_command_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "import", str(DATA / "hazards" / "war.sqlite"), "-o", str(tmp_path / "t")]) == 0
    assert main(["profile", "import", str(DATA / "ncu" / "cast_transpose_1024.raw.csv"), "-o", str(tmp_path / "p")]) == 0
    for run in ("t", "p"):
        command = json.loads((tmp_path / run / "command.json").read_text())
        assert_valid("command", command)
        assert command["backend"] == "import"


def test_sanitize_run_writes_a_valid_command_json_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from tests import fake_tools
    from tracer import gpu

    bin_dir, cfg = fake_tools.install(tmp_path)
    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    for key, value in fake_tools.environ(bin_dir, cfg).items():
        monkeypatch.setenv(key, value)
    fake_tools.configure(cfg, xml=fake_tools.EMPTY_XML, text=fake_tools.CLEAN_TEXT)
    code = main(["sanitize", "--tool", "synccheck", "-o", str(tmp_path / "out"), "--", "python", "target.py"])
    assert code == 0, capsys.readouterr().err
    command = json.loads((tmp_path / "out" / "command.json").read_text())
    assert_valid("command", command)
    assert command["tools"] == ["synccheck"]
    assert_valid("sanitize", json.loads((tmp_path / "out" / "report.json").read_text()))


@pytest.mark.parametrize("job", ["ddp_nccl_2ranks", "ddp_nccl_killed", "ddp_gloo_2ranks", "ddp_killed_markers"])
def test_command_json_of_gpu_runs_before_the_header(job: str) -> None:
    """The H200 captures in tests/data/jobs were written before command.json had `schema` and
    `kind` (the job reader still reads them: test_job.py): their fields are those of the schema."""
    old = json.loads((DATA / "jobs" / job / "command.json").read_text())
    assert "schema" not in old
    assert_valid("command", {"schema": 1, "kind": "command", **old})


def test_environment_as_tracer_reads_it(capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.schemas import with_header
    from tracer.store.rundir import environment

    assert_valid("environment", with_header("environment", environment(gpu=True)))  # what `profile` writes (no GPU here)


# ---- documents printed by commands ------------------------------------------------------------------

@pytest.mark.parametrize("compared,a,b", [
    ("trace", "traces/cast_transpose_dgrad.sqlite", "traces/event_ordered_dgrad.sqlite"),
    ("trace", "hazards/event_ordered_dgrad.sqlite", "hazards/planted_cross_stream.sqlite"),
    ("job", "jobs/ddp_nccl_2ranks", "jobs/ddp_gloo_2ranks"),
    ("profile", "ncu/variants", "ncu/table-4096"),
    ("campaign", "DEMO/campaign.json", "DEMO/campaign.json"),
    ("sanitize", "DEMO/sanitize", "DEMO/sanitize"),
], ids=["trace", "trace-hazards", "job", "profile", "campaign", "sanitize"])
def test_diff(compared: str, a: str, b: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.resources import DEMO_DIR

    def path(p: str) -> str:
        return str(DEMO_DIR / p[5:] if p.startswith("DEMO/") else DATA / p)

    main(["diff", path(a), path(b), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert_valid("diff", doc)
    assert doc["compared"] == compared


def test_campaign_diff_with_a_variant_on_one_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.resources import DEMO_DIR

    shipped = json.loads((DEMO_DIR / "campaign.json").read_text())
    fewer = dict(shipped, variants={k: v for k, v in list(shipped["variants"].items())[1:]} | {"new": {"trials": 50, "failures": 5}})
    (tmp_path / "b.json").write_text(json.dumps(fewer))
    main(["diff", str(DEMO_DIR / "campaign.json"), str(tmp_path / "b.json"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert_valid("diff", doc)
    assert {c["status"] for c in doc["cells"]} >= {"new", "gone"}


def test_sanitize_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("unfiltered-1024", "filtered-128"):
        main(["sanitize", "import", str(DATA / "sanitizer" / name), "--json"])
        (tmp_path / f"{name}.json").write_text(capsys.readouterr().out)
    main(["diff", str(tmp_path / "unfiltered-1024.json"), str(tmp_path / "filtered-128.json"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert_valid("diff", doc)
    assert doc["findings"]["rows"]


def test_workload_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "torch_composite", "--device", "cpu", "--shape", "64x64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert_valid("workload-run", doc)
    assert doc["workload_kind"] == "torch_composite" and doc["passed"] is True


def test_profile_compare(capsys: pytest.CaptureFixture[str]) -> None:
    assert_valid("profile-compare", output(capsys, "profile", "compare", str(DATA / "ncu" / "variants"), "--json"))


def test_campaign_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    profile = tmp_path / "c.yaml"
    profile.write_text(json.dumps({"schema": 1, "name": "t", "workload": "cpu_reference", "variants": ["none", "device_before_atomic"],
                                   "trials_per_cell": 20, "batch": 10, "inject_failure_rate": 0.2, "baseline": "none",
                                   "sprt": {"p0": 0.01, "p1": 0.3}}))
    store = tmp_path / "s.sqlite"
    done = subprocess.run([sys.executable, "-m", "tracer", "campaign", "run", str(profile), "-o", str(store), "--no-progress"],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    doc = output(capsys, "campaign", "report", str(store), "--json")
    assert_valid("campaign-report", doc)
    assert len(doc["cells"]) == 2 and all("sprt" in c and 0 < c["trials"] <= 20 for c in doc["cells"])  # SPRT may stop a cell early


def test_ablation_json(tmp_path: Path) -> None:
    """The shipped ablation JSON has the header; one written by hand without it is read the same."""
    from tracer.artifact import open_campaign
    from tracer.resources import DEMO_DIR

    shipped = json.loads((DEMO_DIR / "campaign.json").read_text())
    assert_valid("ablation", shipped)
    bare = tmp_path / "rates.json"
    bare.write_text(json.dumps({"variants": shipped["variants"]}))
    assert open_campaign(bare).cells == open_campaign(DEMO_DIR / "campaign.json").cells


# ---- tracer serve's API ----------------------------------------------------------------------------

def test_serve_api(tmp_path: Path) -> None:
    """/api/session, /api/runs, each run's summary and JSON (the documents above, as the CLI wrote
    them), /api/jobs and a job through submit, get and list."""
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    import sys
    import time
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from tests.serve_runs import jobs_file, make_runs
    from tracer.serve.app import Settings, build_app
    from tracer.serve.config import load_jobs

    runs = make_runs(tmp_path / "root")
    settings = Settings(roots=(tmp_path / "root",), state_dir=tmp_path / "state", jobs=load_jobs(jobs_file(tmp_path / "jobs.yaml", sys.executable)),
                        gpus=(), allowed_hosts=("testserver",), rescan_s=3600.0, upload_limit=1 << 20, diff=True)
    with TestClient(build_app(settings)) as c:
        session = c.get("/api/session").json()
        assert_valid("session", session)
        c.headers["X-CSRF-Token"] = session["csrf"]
        listed = c.get("/api/runs").json()
        assert_valid("run-list", listed)
        assert listed["total"] == len(runs)
        by_kind = {"trace": "verdict", "job": "job", "sanitize": "sanitize", "profile": PROFILE_KIND}
        for row in listed["runs"]:
            summary = c.get(f"/api/runs/{row['id']}/summary").json()
            assert_valid("run-summary", summary)
            assert summary["run"]["path"] == row["path"] and summary["files"]
            assert_valid(by_kind[row["kind"]], c.get(f"/api/runs/{row['id']}").json())
        traces = [r["id"] for r in listed["runs"] if r["kind"] == "trace"]
        assert_valid("diff", c.get(f"/api/diff?a={traces[0]}&b={traces[1]}").json())
        job = c.post("/api/jobs", json={"action": "command", "target": "hello"}).json()
        assert_valid("queued-job", job)
        deadline = time.monotonic() + 60
        while job["state"] not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(0.2)
            job = c.get(f"/api/jobs/{job['id']}").json()
        assert job["state"] == "done"
        assert_valid("queued-job", job)
        for bad, status in (("/api/runs?sort=evil", 400), ("/api/jobs/999", 404), ("/api/runs/1/timeline?max=abc", 400)):
            answer = c.get(bad)
            assert answer.status_code == status
            assert_valid("error", answer.json())
        jobs = c.get("/api/jobs").json()
        assert_valid("job-list", jobs)
        assert [j["id"] for j in jobs["jobs"]] == [job["id"]]


def test_new_kinds_refuse_what_tracer_does_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "import", str(DATA / "hazards" / "war.sqlite"), "-o", str(tmp_path / "t")]) == 0
    command = json.loads((tmp_path / "t" / "command.json").read_text())
    capsys.readouterr()
    diff = output(capsys, "diff", str(DATA / "traces" / "cast_transpose_dgrad.sqlite"), str(DATA / "traces" / "event_ordered_dgrad.sqlite"),
                  "--json")
    for kind, doc in (("command", command), ("diff", diff)):
        v = validator(kind)
        assert not list(v.iter_errors(doc))
        assert list(v.iter_errors(doc | {"surprise": 1}))
        assert list(v.iter_errors(doc | {"kind": "verdict"}))
        assert list(v.iter_errors({k: x for k, x in doc.items() if k != "schema"}))
    assert list(validator("diff").iter_errors(diff | {"compared": "kernels"}))
    assert list(validator("diff").iter_errors(diff | {"schema": 1}))  # version 1 had another `kind`
