"""A folder of PyTorch profiler traces read as one job (the folder HTA reads): the real Kineto
traces of tests' shared fixtures (HTA's critical_path test traces, both rank 0), copied into a
folder; oracles from the files' own metadata."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tracer.app.diff import diff_paths
from tracer.compare.result import DiffKind
from tracer.artifact import JobRun, open_artifact
from tracer.cli import main
from tracer.analysis.pairs import PairSpec

ROOT = Path(__file__).resolve().parent.parent
KINETO = ROOT.parent / "shared" / "fixtures" / "kineto"
FILES = ("event_sync.json.gz", "event_sync_multi_stream.json.gz")
pytestmark = pytest.mark.skipif(not all((KINETO / f).is_file() for f in FILES), reason=f"shared Kineto fixtures absent ({KINETO})")


def folder(tmp_path: Path) -> Path:
    out = tmp_path / "kineto"
    out.mkdir()
    for f in FILES:
        shutil.copy(KINETO / f, out / f)
    (out / "notes.json").write_text('{"not": "a trace"}')  # other JSON beside the traces is not a process
    return out


def meta(path: Path) -> tuple[int, int]:
    data = json.loads(gzip.open(path).read())
    kernels = sum(1 for e in data["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X")
    return data["distributedInfo"]["rank"], kernels


def test_a_folder_of_traces_is_a_job_with_ranks_from_their_metadata(tmp_path: Path) -> None:
    run = open_artifact(folder(tmp_path))
    assert isinstance(run, JobRun)
    want = {f.split(".")[0]: meta(KINETO / f) for f in FILES}
    assert {p.file: p.rank for p in run.processes} == {k: r for k, (r, _) in want.items()}
    assert all(p.label.startswith("rank 0 pid ") for p in run.processes)  # both traces say rank 0
    ja = run.analyze(PairSpec.from_json("none"), hazards=False)
    assert {p.file: int((a.trace.kernels.kinds() == 0).sum()) for p, a in zip(ja.job.processes, ja.analyses)} == {
        k: n for k, (_, n) in want.items()}
    assert not ja.incomplete and ja.summary.clock.offsets_ns == {p.label: 0 for p in run.processes}


def test_a_kineto_folder_is_analysed_and_diffed_as_a_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = folder(tmp_path)
    assert main(["trace", "analyze", str(src), "--json", "--explain"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "job" and len(data["analyses"]) == 2 and all("time" in a for a in data["analyses"])
    d = diff_paths(src, src)
    assert d.kind is DiffKind.JOB and d.no_change and "processes pooled: A 2, B 2" in d.matching


def test_a_folder_without_traces_is_a_format_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").write_text('{"a": 1}')
    assert main(["trace", "analyze", str(tmp_path)]) == 6
    assert "PyTorch profiler traces" in capsys.readouterr().err
