"""Campaign profiles: a grid of cells (workload x variant x config x shape x dtype) with a trial
count, validated like the workload profiles."""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path
from typing import Any

from tracer.fp8.detector import Check
from tracer.errors import ProfileError, UsageError
from tracer.kernel.spec import Config, InDtype, Variant
from tracer.workloads.profiles import PROFILE_DIR, SCHEMA_VERSION, Field, load_profile

CPU_WORKLOAD = "cpu_reference"
CAMPAIGN_DIR = PROFILE_DIR / "campaigns"
EXECUTORS = ("local", "slurm")
MAX_TASKS = 4096  # workers or array tasks
EXTRA_KEYS = {"workload", "variant", "config", "shape", "dtype", "label"}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # the store is runs/NAME.campaign.sqlite: a file name, no folder

SCHEMA: dict[str, Any] = {
    "schema": Field(kind=int, required=True),
    "name": Field(kind=str, required=True),
    "description": Field(kind=str, default=""),
    "workload": Field(kind=str, required=True),
    "variants": Field(kind=list, default=["none"], items=str, min_items=1, unique=True),
    "extra_cells": Field(kind=list, default=[], items=dict),
    "configs": Field(kind=list, default=["auto"], items=str, min_items=1, unique=True),
    "shapes": Field(kind=list, default=[], items=str, unique=True),
    "dtypes": Field(kind=list, default=["bf16"], items=str, min_items=1, unique=True),
    "steps_per_trial": Field(kind=int, default=1, minimum=1, maximum=10_000),
    "trials_per_cell": Field(kind=int, default=100, minimum=1, maximum=10_000_000),
    "batch": Field(kind=int, default=16, minimum=1, maximum=100_000),
    "seed": Field(kind=int, default=0, minimum=0, maximum=1 << 40),  # trial seeds are seed * 1_000_003 + ...: below 2**63
    "checks": Field(kind=list, default=[c.value for c in Check if c is not Check.UPDATE_COUNT], items=str, min_items=1, unique=True),
    "sample_rows": Field(kind=float, default=1.0, minimum=0.0001, maximum=1.0),
    "baseline": Field(kind=str, default=""),
    "inject_failure_rate": Field(kind=float, default=0.0, minimum=0.0, maximum=1.0),
    "kill_trial": Field(kind=int, default=-1, minimum=-1),
    "sprt": {"p0": Field(kind=float, default=0.0, minimum=0.0, maximum=1.0), "p1": Field(kind=float, default=0.0, minimum=0.0, maximum=1.0)},
    "executor": {
        "kind": Field(kind=str, default="local", choices=EXECUTORS),
        "partition": Field(kind=str, default=""),
        "time_min": Field(kind=int, default=60, minimum=1, maximum=30 * 24 * 60),
        "gpus_per_task": Field(kind=int, default=1, minimum=0, maximum=64),
        "tasks": Field(kind=int, default=4, minimum=1, maximum=MAX_TASKS),
    },
    "sanitize": Field(kind=list, default=[]),
    "trace": Field(kind=list, default=[]),
}


@dataclass(frozen=True, kw_only=True)
class Cell:
    key: str
    label: str
    workload: str
    variant: str
    config: str
    shape: str
    dtype: str


@dataclass(frozen=True)
class SprtBounds:
    p0: float = 0.0
    p1: float = 0.0

    @property
    def enabled(self) -> bool:
        return bool(self.p0 and self.p1)


@dataclass(frozen=True, kw_only=True)
class ExecutorSettings:
    kind: str = "local"
    partition: str = ""
    time_min: int = 60
    gpus_per_task: int = 1
    tasks: int = 4


@dataclass(frozen=True, kw_only=True)
class ExtraCell:
    workload: str
    variant: str = "none"
    config: str = "auto"
    shape: str | None = None  # None: the campaign's first shape
    dtype: str | None = None  # None: the campaign's first dtype
    label: str | None = None


@dataclass(frozen=True, kw_only=True)
class CampaignSpec:
    """A validated campaign profile; field names are the profile's keys."""

    path: Path
    name: str
    workload: str
    description: str = ""
    variants: tuple[str, ...] = ("none",)
    extra_cells: tuple[ExtraCell, ...] = ()
    configs: tuple[str, ...] = ("auto",)
    shapes: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("bf16",)
    steps_per_trial: int = 1
    trials_per_cell: int = 100
    batch: int = 16
    seed: int = 0
    checks: tuple[Check, ...] = ()
    sample_rows: float = 1.0
    baseline: str = ""
    inject_failure_rate: float = 0.0
    kill_trial: int = -1
    sprt: SprtBounds = SprtBounds()
    executor: ExecutorSettings = ExecutorSettings()
    sanitize: tuple[Any, ...] = ()
    trace: tuple[Any, ...] = ()

    @classmethod
    def from_data(cls, path: Path, d: dict[str, Any]) -> CampaignSpec:
        """From a profile's validated data (every key present, as load_profile leaves it)."""
        lists: dict[str, Any] = {k: tuple(d[k]) for k in ("variants", "configs", "shapes", "dtypes", "sanitize", "trace")}
        return cls(path=path, name=d["name"], workload=d["workload"], description=d["description"],
                   extra_cells=tuple(ExtraCell(**e) for e in d["extra_cells"]), checks=tuple(Check(c) for c in d["checks"]),
                   sprt=SprtBounds(**d["sprt"]), executor=ExecutorSettings(**d["executor"]),
                   **lists, **{k: d[k] for k in SCALARS})

    def to_json(self) -> dict[str, Any]:
        """The profile as validated (what the store records)."""
        d = {"schema": SCHEMA_VERSION, **asdict(self)}
        d.pop("path")
        d["checks"] = [c.value for c in self.checks]
        d["extra_cells"] = [{k: v for k, v in asdict(e).items() if v is not None} for e in self.extra_cells]
        return d

    def cells(self) -> list[Cell]:
        shapes = self.shapes or ("default",)
        multi = len(self.configs) * len(shapes) * len(self.dtypes) > 1
        out = [_cell(self.workload, v, c, s, t, multi=multi) for v, c, s, t in product(self.variants, self.configs, shapes, self.dtypes)]
        for e in self.extra_cells:
            out.append(_cell(e.workload, e.variant, e.config, e.shape or shapes[0], e.dtype or self.dtypes[0], label=e.label))
        return out


SCALARS = ("steps_per_trial", "trials_per_cell", "batch", "seed", "sample_rows", "baseline", "inject_failure_rate",
           "kill_trial")


def _cell(workload: str, variant: str, config: str, shape: str, dtype: str, *, multi: bool = False, label: str | None = None) -> Cell:
    key = f"{workload}|{variant}|{config}|{shape}|{dtype}"
    return Cell(key=key, label=label or (f"{variant} {config} {shape} {dtype}" if multi else variant), workload=workload, variant=variant,
                config=config, shape=shape, dtype=dtype)


def _post(where: str, d: dict[str, Any]) -> None:
    if not NAME.fullmatch(d["name"]) or ".." in d["name"]:
        raise ProfileError(f"{where}: key 'name' = {d['name']!r} must be a plain file name: 1 to 100 letters, digits, "
                           "'_', '-' or '.', starting with a letter or digit, no '..' (the store is runs/NAME.campaign.sqlite)")
    names = {v.value for v in Variant}
    for v in d["variants"]:
        if v not in names:
            raise ProfileError(f"{where}: key 'variants' has value {v!r} (allowed: {', '.join(sorted(names))})")
    for c in d["configs"]:
        if c != "auto":
            try:
                Config.parse(str(c))
            except UsageError as exc:
                raise ProfileError(f"{where}: key 'configs': {exc}") from None
    for t in d["dtypes"]:
        if t not in {x.value for x in InDtype}:
            raise ProfileError(f"{where}: key 'dtypes' has value {t!r} (allowed: {', '.join(x.value for x in InDtype)})")
    for c in d["checks"]:
        if c not in {x.value for x in Check}:
            raise ProfileError(f"{where}: key 'checks' has value {c!r} (allowed: {', '.join(x.value for x in Check)})")
    for i, e in enumerate(d["extra_cells"]):
        if "workload" not in e or not set(e) <= EXTRA_KEYS or not all(isinstance(v, str) for v in e.values()):
            raise ProfileError(f"{where}: key 'extra_cells[{i}]' must be a mapping with workload and optional "
                               "variant, config, shape, dtype, label, each a string")
    _check_shapes(where, d)
    sp = d["sprt"]
    if (sp["p0"] or sp["p1"]) and not 0 < sp["p0"] < sp["p1"] < 1:
        raise ProfileError(f"{where}: key 'sprt' needs 0 < p0 < p1 < 1, got p0={sp['p0']}, p1={sp['p1']}")
    labels = _check_cells(where, CampaignSpec.from_data(Path(where), d).cells())
    if d["baseline"] and d["baseline"] not in labels:
        raise ProfileError(f"{where}: key 'baseline' = {d['baseline']!r} is not a cell (cells: {', '.join(labels)})")


def _check_shapes(where: str, d: dict[str, Any]) -> None:
    from tracer.workloads.spec import check_shape

    wanted = [(s, d["workload"]) for s in d["shapes"]] + [(e["shape"], e["workload"]) for e in d["extra_cells"] if "shape" in e]
    for shape, workload in wanted:
        if shape == "default":
            continue
        try:
            check_shape(shape, workload)
        except UsageError as exc:
            raise ProfileError(f"{where}: key 'shapes': {exc}") from None


def _check_cells(where: str, cells: list[Cell]) -> list[str]:
    """Each cell once: two cells with one key would be stored as one, two with one label reported as one."""
    for attr in ("key", "label"):
        seen: set[str] = set()
        for c in cells:
            value = getattr(c, attr)
            if value in seen:
                raise ProfileError(f"{where}: cell {value!r} appears twice (variants, extra_cells and labels must differ)")
            seen.add(value)
    return [c.label for c in cells]


def check_run_options(**values: int | None) -> None:
    """`campaign run` --workers, --tasks, --time-min, --gpus-per-task held to the profile's limits."""
    from tracer.workloads.profiles import check_option

    limits = {**SCHEMA["executor"], "workers": Field(kind=int, minimum=1, maximum=MAX_TASKS)}
    for key, value in values.items():
        if value is not None:
            check_option(f"--{key.replace('_', '-')}", value, limits[key])


def load_campaign(name_or_path: str) -> CampaignSpec:
    path = Path(name_or_path)
    if not os.path.lexists(path):
        candidate = CAMPAIGN_DIR / f"{name_or_path}.yaml"
        if not candidate.is_file():
            from tracer.errors import unknown

            raise unknown("campaign profile", name_or_path, sorted(p.stem for p in CAMPAIGN_DIR.glob("*.yaml")))
        path = candidate
    return CampaignSpec.from_data(path, load_profile(path, SCHEMA, _post).data)
