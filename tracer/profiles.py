"""Workload profiles: versioned YAML, validated key by key with one-line errors naming the file,
the key and the allowed values."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tracer import resources
from tracer.errors import ProfileError

SCHEMA_VERSION = 1
PROFILE_DIR = resources.PROFILE_DIR


@dataclass(frozen=True)
class Field:
    kind: type | tuple[type, ...]
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    required: bool = False


Schema = Mapping[str, "Field | Schema"]


def _type_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({bool: "bool", int: "int", float: "number", str: "string", list: "list"}.get(k, k.__name__) for k in kinds)


def _check_value(where: str, key: str, value: Any, spec: Field) -> Any:
    ok_type = isinstance(value, spec.kind) and not (isinstance(value, bool) and spec.kind in (int, float, (int, float)))
    if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok_type = float(value), True
    if not ok_type:
        raise ProfileError(f"{where}: key '{key}' must be {_type_name(spec.kind)}, got {type(value).__name__} {value!r}")
    if spec.choices is not None and value not in spec.choices:
        raise ProfileError(f"{where}: key '{key}' has value {value!r} (allowed: {', '.join(map(str, spec.choices))})")
    if spec.minimum is not None and value < spec.minimum:
        raise ProfileError(f"{where}: key '{key}' = {value!r} is below the minimum {spec.minimum:g}")
    if spec.maximum is not None and value > spec.maximum:
        raise ProfileError(f"{where}: key '{key}' = {value!r} is above the maximum {spec.maximum:g}")
    return value


def validate(where: str, data: Any, schema: Schema, prefix: str = "") -> dict[str, Any]:
    """Check data against schema; return it with defaults filled in."""
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: {prefix.rstrip('.') or 'the document'} must be a mapping, got {type(data).__name__}")
    unknown = [k for k in data if k not in schema]
    if unknown:
        raise ProfileError(f"{where}: key '{prefix}{unknown[0]}' is unknown (allowed: {', '.join(schema)})")
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        if isinstance(spec, Mapping):
            out[key] = validate(where, data.get(key, {}), spec, f"{prefix}{key}.")
        elif key in data:
            out[key] = _check_value(where, prefix + key, data[key], spec)
        elif spec.required:
            raise ProfileError(f"{where}: required key '{prefix}{key}' is missing")
        else:
            out[key] = spec.default
    return out


def load_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read profile ({exc.strerror})") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise ProfileError(f"{path}:{line} is not valid YAML ({getattr(exc, 'problem', exc)})") from exc


def check_schema_version(where: str, data: Any) -> None:
    if isinstance(data, dict) and data.get("schema") != SCHEMA_VERSION:
        raise ProfileError(f"{where}: key 'schema' must be {SCHEMA_VERSION}, got {data.get('schema')!r}")


@dataclass(frozen=True)
class Loaded:
    path: Path
    data: dict[str, Any] = field(hash=False)


def load_profile(path: Path, schema: Schema, post: Callable[[str, dict[str, Any]], None] | None = None) -> Loaded:
    data = load_yaml(path)
    check_schema_version(str(path), data)
    checked = validate(str(path), data, schema)
    if post is not None:
        post(str(path), checked)
    return Loaded(path, checked)


def builtin_names(directory: Path = PROFILE_DIR, suffix: str = ".yaml") -> list[str]:
    return sorted(p.stem for p in directory.glob(f"*{suffix}"))
