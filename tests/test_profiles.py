from __future__ import annotations

from pathlib import Path

import pytest

from tracer.errors import ProfileError, UsageError
from tracer.workloads.profiles import builtin_names
from tracer.workloads.spec import Kind, load_workload

BASE = "schema: 1\nworkload: linear_backward\n"


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "w.yaml"
    p.write_text(text)
    return p


def test_every_builtin_profile_loads() -> None:
    names = builtin_names()
    assert {"cast_transpose_dgrad", "linear_backward", "torch_composite", "planted_cross_stream",
            "planted_race", "planted_oob", "planted_uninit", "planted_barrier"} <= set(names)
    for name in names:
        spec = load_workload(name)
        assert spec.name == name and spec.steps >= 1
    lb = load_workload("linear_backward")
    assert (lb.kind, lb.layers, lb.microbatches, lb.recipe.amax_history_len) == (Kind.LINEAR_BACKWARD, 4, 2, 1024)
    assert lb.pairs[0] == ("*/cast_transpose", "*/dgrad")


@pytest.mark.parametrize("text,message", [
    (BASE + "paramz: {}\n", r"key 'paramz' is unknown \(allowed: schema, workload, description, params, recipe"),
    (BASE + "params: {layerz: 2}\n", r"key 'params.layerz' is unknown \(allowed: steps, seed, variant"),
    (BASE + "params: {layers: two}\n", r"key 'params.layers' must be int, got str 'two'"),
    (BASE + "params: {layers: true}\n", r"key 'params.layers' must be int, got bool True"),
    (BASE + "params: {layers: 0}\n", r"key 'params.layers' = 0 is below the minimum 1"),
    (BASE + "params: {variant: fence}\n", r"key 'params.variant' has value 'fence' \(allowed: none, device_before_atomic"),
    (BASE + "params: {config: 16/3}\n", r"key 'params.config': store width 3 is not one of"),
    (BASE + "params: {tokens: 100}\n", r"tokens=100 must be a multiple of 16"),
    (BASE + "recipe: {amax_compute_algo: mean}\n", r"key 'recipe.amax_compute_algo' has value 'mean' \(allowed: max, most_recent\)"),
    (BASE + "recipe: {margin: -1}\n", r"key 'recipe.margin' = -1 is below the minimum 0"),
    (BASE + "trace: {pairs: [{producer: a}]}\n", r"key 'trace.pairs\[0\]' must be a mapping with string keys producer and consumer"),
    ("schema: 2\nworkload: linear_backward\n", r"key 'schema' must be 1, got 2"),
    ("schema: 1\n", r"required key 'workload' is missing"),
    ("schema: 1\nworkload: resnet\n", r"key 'workload' has value 'resnet' \(allowed: cast_transpose_dgrad, linear_backward"),
    ("- a\n- b\n", r"key 'schema' must be 1|the document must be a mapping"),
    ("schema: 1\nworkload: [unclosed\n", r"is not valid YAML"),
])
def test_bad_profiles_give_one_line_errors_with_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ProfileError, match=message) as info:
        load_workload(str(path))
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_unknown_workload_and_missing_file() -> None:
    with pytest.raises(UsageError, match=r"unknown workload 'resnet' \(allowed: cast_transpose_dgrad"):
        load_workload("resnet")
    with pytest.raises(ProfileError, match="profile file not found"):
        load_workload("missing.yaml")


def test_overrides_are_validated() -> None:
    spec = load_workload("linear_backward")
    assert spec.with_overrides(layers=2, steps=None).layers == 2
    with pytest.raises(UsageError, match="hidden=100 must be a multiple of 16"):
        spec.with_overrides(hidden=100)
