from __future__ import annotations

import subprocess
import sys

import pytest

from tracer.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv,code,message", [
    (["run", "resnet"], 2, "unknown workload 'resnet' (allowed: cast_transpose_dgrad"),
    (["run", "linear_backward", "--shape", "4096"], 2, "shape '4096' is not TOKENSxHIDDEN"),
    (["run", "linear_backward", "--config", "16/5"], 2, "store width 5 is not one of 1, 2, 4, 8, 16"),
    (["run", "linear_backward", "--steps", "0"], 2, "--steps=0 must be >= 1"),
    (["run", "linear_backward", "--variant", "fence"], 2, "unknown variant 'fence'"),
    (["run", "linear_backward", "--device", "tpu"], 2, "unknown device 'tpu' (allowed: cuda, cpu)"),
    (["kernels", "ptx", "none", "--arch", "sm_70"], 2, "unknown arch 'sm_70'"),
    (["kernels", "config", "--shape", "1x"], 2, "shape '1x' is not ROWSxCOLS"),
])
def test_user_errors_are_one_line_with_exit_code(capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str) -> None:
    got, out, err = run(capsys, *argv)
    assert got == code
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_run_without_gpu_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    code, _, err = run(capsys, "run", "cast_transpose_dgrad")
    assert code == 4 and "no CUDA GPU is visible" in err


def test_run_cpu_composite_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, out, _ = run(capsys, "run", "torch_composite", "--device", "cpu", "--shape", "32x32", "--steps", "2", "--json")
    data = json.loads(out)
    assert code == 0 and data["passed"] and data["steps"] == 2
    assert {c["check"] for c in data["checks"]} >= {"fp8_rowwise", "dgrad", "update_count"}


def test_kernels_ptx_and_list_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kernels", "ptx", "device_before_atomic", "--config", "8/8", "--arch", "sm_120")
    assert code == 0 and ".target sm_120" in out and "membar.gl" in out
    code, out, _ = run(capsys, "kernels", "list")
    assert code == 0 and "system_scope_atomic" in out and "16/16" in out


def test_kernels_diff_shows_scopes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kernels", "diff", "none", "system_scope_atomic")
    assert code == 0
    assert "(scope GPU)" in out and "(scope SYS)" in out


def test_console_script_help_smoke() -> None:
    res = subprocess.run([sys.executable, "-m", "tracer", "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "kernels" in res.stdout and "run" in res.stdout
