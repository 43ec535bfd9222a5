"""Profiles and command-line values fail closed: NaN and inf never switch a check off, YAML alias
bombs and deep nesting are refused before they are built, campaign grids are what they say, and
command-line overrides are held to the limits of the profile keys they replace."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracer.cli import main
from tracer.errors import ProfileError
from tracer.workloads.spec import load_workload

BASE = "schema: 1\nworkload: linear_backward\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8))


def _workload(tmp_path: Path, text: str | bytes) -> Path:
    p = tmp_path / "w.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


@pytest.mark.parametrize("text", [
    BASE + "tolerance: {gemm_rel: .nan}\n", BASE + "tolerance: {gemm_rel: .inf}\n",
    BASE + "tolerance: {grad_norm_ratio: .inf}\n", BASE + "params: {input_scale: .nan}\n",
    BASE + "tolerance: {gemm_rel: -.inf}\n",
])
def test_nan_and_inf_numbers_are_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(ProfileError, match="must be a finite number"):
        load_workload(str(_workload(tmp_path, text)))


def test_an_alias_bomb_is_refused_without_being_expanded(tmp_path: Path) -> None:
    """10**9 values once expanded: refused from the node graph, and the message stays one short line."""
    with pytest.raises(ProfileError, match="expands to more than 100000 values") as info:
        load_workload(str(_workload(tmp_path, BASE + BOMB.replace("a:", "description:", 0))))
    assert len(str(info.value)) < 300 and "x, x" not in str(info.value)


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="recursive alias"):
        load_workload(str(_workload(tmp_path, BASE + "trace: {pairs: &p [*p]}\n")))


def test_deep_nesting_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="nested too deeply|expands to more"):
        load_workload(str(_workload(tmp_path, BASE + "description: " + "[" * 100_000 + "]" * 100_000 + "\n")))


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _workload(tmp_path, BASE.encode() + b"description: caf\xe9\n")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not UTF-8 text (byte 0xe9 at offset" in err and err.count("\n") == 1


def test_a_huge_value_is_never_printed_whole(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="must be int") as info:
        load_workload(str(_workload(tmp_path, BASE + "params: {layers: [" + ", ".join(["123456789"] * 5000) + "]}\n")))
    assert len(str(info.value)) < 300


# -- campaign profiles --------------------------------------------------------------------------

def _campaign(tmp_path: Path, **over: object) -> Path:
    data = {"schema": 1, "name": "t", "workload": "cpu_reference", "variants": ["none", "device_before_atomic"],
            "trials_per_cell": 4, "batch": 2}
    data.update(over)
    p = tmp_path / "c.yaml"
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize("over,message", [
    ({"variants": [["none"]]}, r"key 'variants' must list strings, got list \['none'\]"),
    ({"variants": []}, r"key 'variants' must list at least 1 item"),
    ({"variants": ["none", "none"]}, r"key 'variants' lists 'none' twice"),
    ({"configs": [["16/8"]]}, r"key 'configs' must list strings"),
    ({"dtypes": [{"a": 1}]}, r"key 'dtypes' must list strings"),
    ({"shapes": ["abc"]}, r"key 'shapes': shape 'abc' is not TOKENSxHIDDEN"),
    ({"shapes": ["0x5"]}, r"key 'shapes': shape '0x5' is not TOKENSxHIDDEN"),
    ({"workload": "cast_transpose_dgrad", "shapes": ["99999999984x16"]}, r"tokens 99999999984 is above the maximum 1048576"),
    ({"executor": {"tasks": 100000000}}, r"key 'executor.tasks' = 100000000 is above the maximum 4096"),
    ({"extra_cells": [{"workload": "cpu_reference", "variant": "none"}]}, r"cell 'cpu_reference\|none\|auto\|default\|bf16' appears twice"),
    ({"extra_cells": [{"workload": ["cpu_reference"]}]}, r"extra_cells\[0\]' must be a mapping .* each a string"),
    ({"sample_rows": float("nan")}, r"key 'sample_rows' must be number, got str 'NaN'"),  # JSON's NaN is a YAML string
    ({"seed": 10 ** 30}, r"key 'seed' = 1000.* is above the maximum 1099511627776"),
])
def test_bad_campaign_profiles_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], over: dict, message: str) -> None:
    import re

    code = main(["campaign", "run", str(_campaign(tmp_path, **over)), "-o", str(tmp_path / "s.sqlite"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and re.search(message, err), err
    assert err.count("\n") == 1 and not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("flag,value,message", [("--workers", "-1", "below the minimum 1"), ("--workers", "0", "below the minimum 1"),
                                                ("--tasks", "100000000", "above the maximum 4096"),
                                                ("--time-min", "0", "below the minimum 1")])
def test_campaign_run_options_are_held_to_the_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     flag: str, value: str, message: str) -> None:
    code = main(["campaign", "run", str(_campaign(tmp_path)), "-o", str(tmp_path / "s.sqlite"), "--no-progress", flag, value])
    err = capsys.readouterr().err
    assert code == 2 and f"{flag} {value} is {message}" in err and err.count("\n") == 1
    assert not (tmp_path / "s.sqlite").exists()


# -- command-line values that would bypass the profile's limits ----------------------------------

@pytest.mark.parametrize("argv,message", [
    (["run", "linear_backward", "--shape", "99999999984x16"], "--shape: tokens 99999999984 is above the maximum 1048576"),
    (["run", "linear_backward", "--shape", ""], "shape '' is not TOKENSxHIDDEN"),
    (["run", "linear_backward", "--seed", "-1"], "--seed -1 is below the minimum 0"),
    (["run", "linear_backward", "--seed", str(10 ** 23)], "--seed 100000000000000000000000 is above the maximum"),
    (["run", "linear_backward", "--steps", "99999999999"], "--steps 99999999999 is above the maximum 1000000"),
    (["run", "linear_backward", "--layers", "100000"], "--layers 100000 is above the maximum 256"),
    (["trace", "run", "linear_backward", "--seed", "-1"], "--seed -1 is below the minimum 0"),
    (["sanitize", "linear_backward", "--steps", "99999999999"], "--steps 99999999999 is above the maximum"),
    (["sanitize", "linear_backward", "--shape", ""], "shape '' is not TOKENSxHIDDEN"),
    (["sanitize", "cast_transpose_dgrad", "--shape", "16x16x99999999984"], "--shape: hidden 99999999984 is above the maximum"),
])
def test_cli_overrides_are_held_to_the_profile_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and not any(tmp_path.iterdir())


def test_seed_that_is_not_an_int_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "linear_backward", "--seed", "1e23"])
    assert info.value.code == 2 and "Traceback" not in capsys.readouterr().err


def test_campaign_nan_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("schema: 1\nname: t\nworkload: cpu_reference\ninject_failure_rate: .nan\n")
    assert main(["campaign", "run", str(p), "-o", str(tmp_path / "s.sqlite")]) == 2
    assert "key 'inject_failure_rate' must be a finite number" in capsys.readouterr().err
