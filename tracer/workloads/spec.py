"""Workload profiles -> WorkloadSpec, the frozen description every run, trace and sanitize uses."""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from tracer.errors import ProfileError, UsageError, unknown
from tracer.kernel.spec import Config, InDtype, Variant
from tracer.workloads.profiles import PROFILE_DIR, Field, builtin_names, check_option, load_profile
from tracer.fp8.scaling import AmaxAlgo, Fp8Recipe, RecipeConfig


class Kind(str, Enum):
    CAST_TRANSPOSE_DGRAD = "cast_transpose_dgrad"
    LINEAR_BACKWARD = "linear_backward"
    TORCH_COMPOSITE = "torch_composite"
    PLANTED_CROSS_STREAM = "planted_cross_stream"
    EVENT_ORDERED_DGRAD = "event_ordered_dgrad"


WORKLOAD_SCHEMA: dict[str, Any] = {
    "schema": Field(kind=int, required=True),
    "workload": Field(kind=str, required=True, choices=tuple(k.value for k in Kind)),
    "description": Field(kind=str, default=""),
    "params": {
        "steps": Field(kind=int, default=3, minimum=1, maximum=1_000_000),
        "seed": Field(kind=int, default=0, minimum=0, maximum=(1 << 63) - 1),
        "variant": Field(kind=str, default="none", choices=tuple(v.value for v in Variant)),
        "config": Field(kind=str, default="auto"),
        "in_dtype": Field(kind=str, default="bf16", choices=tuple(d.value for d in InDtype)),
        "tokens": Field(kind=int, default=4096, minimum=16, maximum=1 << 20),
        "hidden": Field(kind=int, default=4096, minimum=16, maximum=1 << 16),
        "out_features": Field(kind=int, default=0, minimum=0, maximum=1 << 16),
        "layers": Field(kind=int, default=1, minimum=1, maximum=256),
        "microbatches": Field(kind=int, default=1, minimum=1, maximum=1024),
        "checkpointing": Field(kind=bool, default=False),
        "input_scale": Field(kind=float, default=1.0, minimum=1e-30),
        "cross_stream_layer": Field(kind=int, default=-1, minimum=-1),
    },
    "recipe": {
        "fp8_format": Field(kind=str, default="hybrid", choices=tuple(f.value for f in Fp8Recipe)),
        "amax_history_len": Field(kind=int, default=1024, minimum=1, maximum=1 << 20),
        "amax_compute_algo": Field(kind=str, default="max", choices=tuple(a.value for a in AmaxAlgo)),
        "margin": Field(kind=int, default=0, minimum=0, maximum=64),
    },
    "tolerance": {
        "gemm_rel": Field(kind=float, default=2e-2, minimum=0.0),
        "grad_norm_ratio": Field(kind=float, default=4.0, minimum=1.0),
    },
    "trace": {"pairs": Field(kind=list, default=[])},
    "sanitize": {"kernel_filter": Field(kind=list, default=[])},
    "concurrency": Field(kind=int, default=0, minimum=0, maximum=16),  # tracer serve: jobs sharing one GPU (0: the server's default, 1)
}


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    name: str
    kind: Kind
    path: Path | None
    steps: int
    seed: int
    variant: Variant
    config: Config | None  # None: the heuristic picks
    in_dtype: InDtype
    tokens: int
    hidden: int
    out_features: int
    layers: int
    microbatches: int
    checkpointing: bool
    input_scale: float
    cross_stream_layer: int  # linear_backward: this layer's dgrad runs on a second stream with no wait (-1: none)
    recipe: RecipeConfig
    gemm_rel_tol: float
    grad_norm_ratio: float
    pairs: tuple[tuple[str, str], ...]
    kernel_filter: tuple[str, ...]
    concurrency: int = 0  # jobs of this workload that `tracer serve` may run on one GPU at once (0: the server's default)

    @property
    def out_dim(self) -> int:
        return self.out_features or self.hidden

    def with_overrides(self, **kw: Any) -> WorkloadSpec:
        clean = {k: check_override(k, v) for k, v in kw.items() if v is not None}
        spec = replace(self, **clean)
        spec.check()
        return spec

    def check(self) -> None:
        for name, value in (("tokens", self.tokens), ("hidden", self.hidden), ("out_features", self.out_dim)):
            if value % 16:
                raise UsageError(f"{name}={value} must be a multiple of 16 (FP8 GEMM operands need it)")
        if self.config is not None:
            self.config.check_shape(self.in_dtype, self.tokens, self.out_dim)
        if self.cross_stream_layer >= self.layers:
            raise UsageError(f"cross_stream_layer={self.cross_stream_layer} must be below layers={self.layers}")


OPTION_OF = {"tokens": "--shape: tokens", "hidden": "--shape: hidden", "out_features": "--shape: out_features"}


def check_override(key: str, value: Any) -> Any:
    """A command-line override held to the limits its profile key has (--steps, --seed, --shape...)."""
    spec = WORKLOAD_SCHEMA["params"].get(key)
    if isinstance(spec, Field) and spec.kind in (int, float):
        return check_option(OPTION_OF.get(key, f"--{key.replace('_', '-')}"), value, spec)
    return value


def _post_check(where: str, data: dict[str, Any]) -> None:
    cfg = data["params"]["config"]
    if cfg != "auto":
        try:
            Config.parse(cfg)
        except UsageError as exc:
            raise ProfileError(f"{where}: key 'params.config': {exc}") from None
    for i, pair in enumerate(data["trace"]["pairs"]):
        if not (isinstance(pair, dict) and set(pair) == {"producer", "consumer"} and all(isinstance(v, str) for v in pair.values())):
            raise ProfileError(f"{where}: key 'trace.pairs[{i}]' must be a mapping with string keys producer and consumer")
    for i, name in enumerate(data["sanitize"]["kernel_filter"]):
        if not isinstance(name, str):
            raise ProfileError(f"{where}: key 'sanitize.kernel_filter[{i}]' must be a string")


def spec_from_data(name: str, path: Path | None, data: dict[str, Any]) -> WorkloadSpec:
    p, r, t = data["params"], data["recipe"], data["tolerance"]
    spec = WorkloadSpec(
        name=name, kind=Kind(data["workload"]), path=path, steps=p["steps"], seed=p["seed"],
        variant=Variant(p["variant"]), config=None if p["config"] == "auto" else Config.parse(p["config"]),
        in_dtype=InDtype(p["in_dtype"]), tokens=p["tokens"], hidden=p["hidden"], out_features=p["out_features"],
        layers=p["layers"], microbatches=p["microbatches"], checkpointing=p["checkpointing"],
        input_scale=p["input_scale"], cross_stream_layer=p["cross_stream_layer"],
        recipe=RecipeConfig(Fp8Recipe(r["fp8_format"]), r["amax_history_len"], AmaxAlgo(r["amax_compute_algo"]), r["margin"]),
        gemm_rel_tol=t["gemm_rel"], grad_norm_ratio=t["grad_norm_ratio"],
        pairs=tuple((q["producer"], q["consumer"]) for q in data["trace"]["pairs"]),
        kernel_filter=tuple(data["sanitize"]["kernel_filter"]), concurrency=data["concurrency"],
    )
    try:
        spec.check()
    except UsageError as exc:
        raise ProfileError(f"{path or name}: {exc}") from None
    return spec


def parse_shape(text: str, kind: Kind) -> dict[str, int]:
    parts = text.lower().split("x")
    if not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts) or len(parts) not in (2, 3):
        raise UsageError(f"shape {text!r} is not TOKENSxHIDDEN or TOKENSxOUTxIN with positive integers")
    dims = [int(p) for p in parts]
    if len(dims) == 3:
        if kind in (Kind.LINEAR_BACKWARD, Kind.TORCH_COMPOSITE):
            raise UsageError(f"shape {text!r}: {kind.value} takes TOKENSxHIDDEN (its layers are square)")
        return {"tokens": dims[0], "out_features": dims[1], "hidden": dims[2]}
    return {"tokens": dims[0], "hidden": dims[1], "out_features": 0}


def check_shape(text: str, workload: str) -> None:
    """A shape for `workload` (a built-in name or profile; any other name: the format only)."""
    if workload in builtin_names() or Path(workload).suffix in (".yaml", ".yml"):
        spec = load_workload(workload)
        spec.with_overrides(**parse_shape(text, spec.kind))
    else:
        parse_shape(text, Kind.CAST_TRANSPOSE_DGRAD)


def resolve_workload(name: str, *, variant: str | None = None, config: str | None = None, shape: str | None = None,
                     **params: Any) -> WorkloadSpec:
    """A workload with the command line's overrides: a variant name, config 'auto' (the heuristic) or
    LOAD/STORE, shape text, and profile params (steps, seed, ...); None keeps the profile's."""
    from tracer.kernel.spec import parse_variant

    spec = load_workload(name)
    shape_over = parse_shape(shape, spec.kind) if shape is not None else {}
    spec = spec.with_overrides(variant=parse_variant(variant) if variant else None, **params, **shape_over)
    if config == "auto":
        return replace(spec, config=None)
    return spec.with_overrides(config=None if config is None else Config.parse(config))


def load_workload(name_or_path: str) -> WorkloadSpec:
    """A built-in workload name (profiles/NAME.yaml) or a path to a profile YAML."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or os.path.lexists(path):
        if not os.path.lexists(path):
            raise ProfileError(f"{path}: profile file not found")
        name = path.stem
    else:
        names = builtin_names()
        if name_or_path not in names:
            raise unknown("workload", name_or_path, names)
        path = PROFILE_DIR / f"{name_or_path}.yaml"
        name = name_or_path
    loaded = load_profile(path, WORKLOAD_SCHEMA, _post_check)
    return spec_from_data(name, path, loaded.data)
