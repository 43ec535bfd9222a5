"""Campaign profiles: a grid of cells (workload x variant x config x shape x dtype) with a trial
count, validated like the workload profiles."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

from tracer.fp8.detector import Check
from tracer.errors import ProfileError, UsageError
from tracer.kernel.spec import Config, InDtype, Variant
from tracer.profiles import PROFILE_DIR, Field, load_profile

CPU_WORKLOAD = "cpu_reference"
CAMPAIGN_DIR = PROFILE_DIR / "campaigns"
EXECUTORS = ("local", "slurm")

SCHEMA: dict[str, Any] = {
    "schema": Field(int, required=True),
    "name": Field(str, required=True),
    "description": Field(str, ""),
    "workload": Field(str, required=True),
    "variants": Field(list, ["none"]),
    "extra_cells": Field(list, []),
    "configs": Field(list, ["auto"]),
    "shapes": Field(list, []),
    "dtypes": Field(list, ["bf16"]),
    "steps_per_trial": Field(int, 1, minimum=1, maximum=10_000),
    "trials_per_cell": Field(int, 100, minimum=1, maximum=10_000_000),
    "batch": Field(int, 16, minimum=1, maximum=100_000),
    "seed": Field(int, 0, minimum=0),
    "checks": Field(list, [c.value for c in Check if c is not Check.UPDATE_COUNT]),
    "sample_rows": Field(float, 1.0, minimum=0.0001, maximum=1.0),
    "baseline": Field(str, ""),
    "inject_failure_rate": Field(float, 0.0, minimum=0.0, maximum=1.0),
    "kill_trial": Field(int, -1, minimum=-1),
    "sprt": {"p0": Field(float, 0.0, minimum=0.0, maximum=1.0), "p1": Field(float, 0.0, minimum=0.0, maximum=1.0)},
    "executor": {
        "kind": Field(str, "local", choices=EXECUTORS),
        "partition": Field(str, ""),
        "time_min": Field(int, 60, minimum=1),
        "gpus_per_task": Field(int, 1, minimum=0),
        "tasks": Field(int, 4, minimum=1),
    },
    "sanitize": Field(list, []),
    "trace": Field(list, []),
}


@dataclass(frozen=True)
class Cell:
    key: str
    label: str
    workload: str
    variant: str
    config: str
    shape: str
    dtype: str


@dataclass(frozen=True)
class CampaignSpec:
    path: Path
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return self.data["name"]

    def cells(self) -> list[Cell]:
        d = self.data
        shapes = d["shapes"] or ["default"]
        out = [_cell(d["workload"], v, c, s, t, multi=len(d["configs"]) * len(shapes) * len(d["dtypes"]) > 1)
               for v, c, s, t in product(d["variants"], d["configs"], shapes, d["dtypes"])]
        for extra in d["extra_cells"]:
            out.append(_cell(extra["workload"], extra.get("variant", "none"), extra.get("config", "auto"),
                             extra.get("shape", shapes[0]), extra.get("dtype", d["dtypes"][0]), label=extra.get("label")))
        return out

    @property
    def checks(self) -> frozenset[Check]:
        return frozenset(Check(c) for c in self.data["checks"])


def _cell(workload: str, variant: str, config: str, shape: str, dtype: str, *, multi: bool = False, label: str | None = None) -> Cell:
    key = f"{workload}|{variant}|{config}|{shape}|{dtype}"
    return Cell(key, label or (f"{variant} {config} {shape} {dtype}" if multi else variant), workload, variant, config, shape, dtype)


def _post(where: str, d: dict[str, Any]) -> None:
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
        if not isinstance(e, dict) or "workload" not in e or not set(e) <= {"workload", "variant", "config", "shape", "dtype", "label"}:
            raise ProfileError(f"{where}: key 'extra_cells[{i}]' must be a mapping with workload and optional "
                               "variant, config, shape, dtype, label")
    sp = d["sprt"]
    if (sp["p0"] or sp["p1"]) and not 0 < sp["p0"] < sp["p1"] < 1:
        raise ProfileError(f"{where}: key 'sprt' needs 0 < p0 < p1 < 1, got p0={sp['p0']}, p1={sp['p1']}")
    labels = [c.label for c in CampaignSpec(Path(where), d).cells()]
    if d["baseline"] and d["baseline"] not in labels:
        raise ProfileError(f"{where}: key 'baseline' = {d['baseline']!r} is not a cell (cells: {', '.join(labels)})")


def load_campaign(name_or_path: str) -> CampaignSpec:
    path = Path(name_or_path)
    if not path.is_file():
        candidate = CAMPAIGN_DIR / f"{name_or_path}.yaml"
        if not candidate.is_file():
            from tracer.errors import unknown

            raise unknown("campaign profile", name_or_path, sorted(p.stem for p in CAMPAIGN_DIR.glob("*.yaml")))
        path = candidate
    return CampaignSpec(path, load_profile(path, SCHEMA, _post).data)
