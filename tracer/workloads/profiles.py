"""Workload profiles: versioned YAML, validated key by key with one-line errors naming the file,
the key and the allowed values."""
from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tracer import resources
from tracer.errors import ProfileError, UsageError

SCHEMA_VERSION = 1
PROFILE_DIR = resources.PROFILE_DIR
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, 4, 4, 40, 40, 24


MAX_YAML_BYTES = 4 << 20  # profiles are a few hundred bytes
MAX_YAML_NODES = 100_000  # values a document may expand to, aliases expanded


@dataclass(frozen=True, kw_only=True)
class Field:
    kind: type | tuple[type, ...]
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    required: bool = False
    items: type | None = None  # lists: the type of every item
    min_items: int = 0  # lists: at least this many items
    unique: bool = False  # lists: no item twice


Schema = Mapping[str, "Field | Schema"]


def _type_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({bool: "bool", int: "int", float: "number", str: "string", list: "list"}.get(k, k.__name__) for k in kinds)


def short(value: Any) -> str:
    """A value for a one-line message: its repr, cut short (a huge or aliased value is never printed whole)."""
    return _REPR.repr(value)


def num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _coerce(value: Any, spec: Field) -> tuple[Any, str | None]:
    """(value, None) when its type is right (ints widen to float), else (value, what is wrong)."""
    numeric = spec.kind in (int, float, (int, float))
    if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, spec.kind) or (isinstance(value, bool) and numeric):
        return value, f"must be {_type_name(spec.kind)}, got {type(value).__name__} {short(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return value, f"must be a finite number, got {short(value)}"
    return value, None


def _range_problem(value: Any, spec: Field) -> str | None:
    if spec.minimum is not None and value < spec.minimum:
        return f"is below the minimum {num(spec.minimum)}"
    if spec.maximum is not None and value > spec.maximum:
        return f"is above the maximum {num(spec.maximum)}"
    return None


def _list_problem(value: list[Any], spec: Field) -> str | None:
    if spec.items is not None:
        bad = next((v for v in value if not isinstance(v, spec.items)), None)
        if bad is not None or (spec.items is not bool and any(isinstance(v, bool) for v in value)):
            return f"must list {_type_name(spec.items)}s, got {type(bad).__name__} {short(bad)}"
    if len(value) < spec.min_items:
        return f"must list at least {spec.min_items} item{'s' if spec.min_items > 1 else ''}, got {short(value)}"
    if spec.unique:
        seen: set[Any] = set()
        for v in value:
            if v in seen:
                return f"lists {short(v)} twice"
            seen.add(v)
    return None


def _check_value(where: str, key: str, value: Any, spec: Field) -> Any:
    value, wrong = _coerce(value, spec)
    if wrong is None and spec.choices is not None and value not in spec.choices:
        wrong = f"has value {short(value)} (allowed: {', '.join(map(str, spec.choices))})"
    if wrong is None and isinstance(value, (int, float)):
        wrong = _range_problem(value, spec)
        wrong = f"= {short(value)} {wrong}" if wrong else None
    if wrong is None and isinstance(value, list):
        wrong = _list_problem(value, spec)
    if wrong is not None:
        raise ProfileError(f"{where}: key '{key}' {wrong}")
    return value


def check_option(flag: str, value: Any, spec: Field) -> Any:
    """A command-line value held to the limits of the profile key it overrides (UsageError)."""
    value, wrong = _coerce(value, spec)
    if wrong is None:
        wrong = _range_problem(value, spec)
    if wrong is not None:
        raise UsageError(f"{flag} {short(value)} {wrong}")
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
    """A YAML file as data: UTF-8, at most MAX_YAML_BYTES, and at most MAX_YAML_NODES values once
    aliases are expanded (checked on the node graph, before any value is built)."""
    from tracer.store.inputs import read_limited

    raw = read_limited(path, MAX_YAML_BYTES, "a profile", ProfileError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    try:
        return _bounded_load(text, path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise ProfileError(f"{path}:{line} is not valid YAML ({getattr(exc, 'problem', None) or short(str(exc))})") from None
    except RecursionError:
        raise ProfileError(f"{path}: YAML nested too deeply") from None


def _bounded_load(text: str, path: Path) -> Any:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, path, loader)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_size(root: yaml.Node, path: Path, loader: yaml.SafeLoader) -> None:
    """Walk the node graph as the built value would be (aliases expanded), stopping at the bound:
    an alias bomb or a recursive alias costs MAX_YAML_NODES steps, never its expansion. A mapping
    that repeats a key is refused (PyYAML keeps the last value silently: a second `kernel: '*'`
    would widen a suppression to everything)."""
    stack, count = [root], 0
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise ProfileError(f"{path}: the YAML expands to more than {MAX_YAML_NODES} values "
                               "(aliases of aliases, or a recursive alias); refused before building it")
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            _check_unique_keys(node, path, loader)
            stack.extend(n for pair in node.value for n in pair)


def _check_unique_keys(node: yaml.MappingNode, path: Path, loader: yaml.SafeLoader) -> None:
    """Scalar keys compared by the value they build to (`1` and `0x1`, `yes` and `true` alike)."""
    seen: dict[Any, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        value, line = loader.construct_object(key), key.start_mark.line + 1
        if value in seen:
            raise ProfileError(f"{path}: line {line}: key {key.value!r} repeats the key of line {seen[value]} "
                               "(a mapping holds each key once)")
        seen[value] = line


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
