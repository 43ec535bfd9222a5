"""`tracer doctor` and the first-use messages, on the machine the tests run on: the shipped files
are found through the same lookups the commands use, a missing one is an error (exit 5), and a
box with no GPU is told what runs without one."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracer import doctor, gpu, resources
from tracer.cli import main
from tracer.errors import NoGpuError

NO_GPU = gpu.probe().devices == 0


def _gpu_box() -> None:
    if not NO_GPU:
        pytest.skip("the driver reports a GPU here: the no-GPU messages are not shown")


def test_doctor_finds_the_shipped_files_where_the_commands_look() -> None:
    report = doctor.run_checks()
    kernel, profiles = report.get("kernel sources"), report.get("workload profiles")
    assert kernel.found and kernel.version == str(resources.KERNEL_DIR / "cast_transpose.cu")
    assert profiles.found and profiles.version == f"11 in {resources.PROFILE_DIR}"
    assert report.get("default suppressions").version == str(resources.SUPPRESSIONS_FILE)
    assert report.get("campaign profiles").found and report.get("demo data").found
    assert report.ok


def test_doctor_without_a_gpu_says_what_works_without(capsys: pytest.CaptureFixture[str]) -> None:
    _gpu_box()
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "--  GPU (driver)" in out and "--  GPU (torch)" in out
    assert "trace/sanitize/run need a GPU; `tracer run torch_composite --device cpu` and `tracer demo` work without" in out


def test_doctor_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"schema", "kind", "ok", "checks", "advice"} and doc["ok"] is True and doc["kind"] == "doctor"
    assert all(set(c) == {"name", "found", "version", "hint", "needed_by", "required"} for c in doc["checks"])
    names = [c["name"] for c in doc["checks"]]
    for name in ("kernel sources", "workload profiles", "default suppressions", "cupti-python", "libcupti",
                 "compute-sanitizer", "ncu", "nsys", "nsys can write reports", "NVRTC"):
        assert name in names
    assert all(c["hint"] for c in doc["checks"] if not c["found"])
    assert all(isinstance(a, str) for a in doc["advice"])


def test_doctor_fails_when_the_kernel_source_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.kernel import compile as nvrtc_compile

    monkeypatch.setattr(nvrtc_compile, "KERNEL_DIR", tmp_path)
    assert main(["doctor"]) == 5
    captured = capsys.readouterr()
    assert "--  kernel sources" in captured.out and str(tmp_path / "cast_transpose.cu") in captured.out
    assert "reinstall tracer" in captured.out
    assert captured.err.strip() == "tracer: error: doctor: required kernel sources not found (see above)"


def test_run_without_a_gpu_points_at_device_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    _gpu_box()
    assert main(["run", "torch_composite", "--steps", "1"]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU is visible" in err and "--device cpu" in err


@pytest.mark.skipif(not NO_GPU, reason="the driver reports a GPU here")
def test_capture_check_says_no_gpu_first() -> None:
    with pytest.raises(NoGpuError, match=r"^no CUDA GPU is visible .*`tracer demo` work without$"):
        gpu.require_gpu_for_capture()
