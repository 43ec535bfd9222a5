"""profile.json: what `tracer profile` and `tracer profile import` leave in a run directory (the
records of every launch, so later steps need neither ncu nor the report reader)."""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracer.errors import TraceFormatError
from tracer.ncu.records import NcuReport
from tracer.store.inputs import MB, load_json_object

PROFILE_JSON = "profile.json"
PROFILE_LIMIT = 64 * MB  # every launch's metrics: a 2,000-launch --set full profile is about 10 MB
SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class ProfiledTarget:
    label: str
    variant: str | None
    report: NcuReport
    exit: int | None = None  # the target's exit under ncu; None for an imported report
    files: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "variant": self.variant, "exit": self.exit, "files": list(self.files),
                "report": self.report.to_json()}


@dataclass(frozen=True)
class ProfileRun:
    path: str
    clock_control: str | None  # as the run asked ncu; for imports, what the report says (None: unknown)
    targets: tuple[ProfiledTarget, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)  # workload, shape, config, in_dtype when known

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "kind": "tracer-profile", "clock_control": self.clock_control,
                "meta": dict(self.meta), "targets": [t.to_json() for t in self.targets]}


def is_profile_run(path: Path) -> bool:
    return os.path.lexists(path / PROFILE_JSON) if path.is_dir() else path.name == PROFILE_JSON


def load_run(path: Path) -> ProfileRun:
    file = path / PROFILE_JSON if path.is_dir() else path
    if not os.path.lexists(file):
        raise TraceFormatError(f"{path}: no {PROFILE_JSON} (expected a `tracer profile` run directory)")
    try:
        data = load_json_object(file, PROFILE_JSON, PROFILE_LIMIT)
        if data.get("kind") != "tracer-profile" or data.get("schema") != SCHEMA:
            raise ValueError(f"kind {data.get('kind')!r} schema {data.get('schema')!r}, expected tracer-profile {SCHEMA}")
        targets = tuple(ProfiledTarget(label=t["label"], variant=t.get("variant"), report=NcuReport.from_json(t["report"]), exit=t.get("exit"),
                                       files=tuple(t.get("files", ()))) for t in data["targets"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TraceFormatError(f"{file}: not a tracer profile.json ({exc})") from None
    if not targets:
        raise TraceFormatError(f"{file}: no profiled targets")
    return ProfileRun(str(file.parent), data.get("clock_control"), targets, data.get("meta") or {})
