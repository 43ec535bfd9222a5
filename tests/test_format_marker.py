"""The process marker as a typed contract (tracer/format/marker.py): real markers from the H200
captures under tests/data/jobs read into the record and validate against the shipped JSON Schema,
which is the one the record makes; a key unknown, missing or mistyped is one MarkerError naming it;
and no module but the format names a marker key as a string."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import DATA
from tracer.format.marker import COMMAND_KEYS, Marker, MarkerError, State, json_schema
from tracer.resources import package_dir

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = package_dir() / "data" / "schemas" / "marker.schema.json"
REAL = sorted((DATA / "jobs").glob("*/procs/*.json"))
KEYS = {f for f in Marker.__dataclass_fields__}
# Marker keys that also name other things in the modules that handle markers (an untraced process's
# pid in command.json, a backend's name, a trace file on a Kineto record...): not looked for there.
SHARED_WORDS = {"schema", "file", "pid", "ppid", "host", "rank", "argv", "backend", "memory", "state", "error", "kernels",
                "devices", "timing", "ended", "exit", "exception", "trace", "cuda", "errors", "partial", "outcome", "executable"}


def test_the_shipped_schema_is_the_one_the_record_makes() -> None:
    assert json.loads(SCHEMA.read_text()) == json_schema()
    jsonschema.Draft202012Validator.check_schema(json_schema())


@pytest.mark.parametrize("path", REAL, ids=[f"{p.parent.parent.name}/{p.name}" for p in REAL])
def test_real_markers_validate_and_read(path: Path) -> None:
    data = json.loads(path.read_text())
    errors = [e.message for e in jsonschema.Draft202012Validator(json_schema()).iter_errors(data)]
    assert not errors, errors[:3]
    m = Marker.load(path)
    assert (m.file, m.pid, m.state.value) == (path.stem, data["pid"], data["state"])
    again = Marker.from_json(m.to_json())
    assert again == m  # what is written reads back the same
    assert not list(jsonschema.Draft202012Validator(json_schema()).iter_errors(m.to_json()))


def test_real_markers_cover_every_ending() -> None:
    assert len(REAL) >= 12
    assert {Marker.load(p).state for p in REAL} >= {State.EXITED, State.DIED, State.RUNNING}


@pytest.mark.parametrize("edit,message", [
    ({"colour": "red"}, "unknown key 'colour' in a process marker"),
    ({"pid": None}, "pid must be an integer, not None"),
    ({"rank": "0"}, "rank must be an integer or null, not '0'"),
    ({"fork_child": 1}, "fork_child must be true or false, not 1"),
    ({"state": "zombie"}, "state 'zombie' is not one of exited, died, running, detached, capture_failed"),
    ({"clock_end": [1, 2, 3]}, "clock_end must be [cupti_ns, unix_ns] (two integers) or null, not [1, 2, 3]"),
    ({"argv": ["python", 3]}, "argv must be a list of strings, not ['python', 3]"),
    ({"schema": 2}, "marker schema 2 is newer than this tracer reads (1)"),
])
def test_a_bad_key_is_named(edit: dict, message: str) -> None:
    data = {**json.loads(REAL[0].read_text()), **edit}
    with pytest.raises(MarkerError, match="^where: ") as err:
        Marker.from_json(data, "where")
    assert message in str(err.value)


@pytest.mark.parametrize("key", ["pid", "host", "state", "file"])
def test_a_missing_required_key_is_named(key: str) -> None:
    data = {k: v for k, v in json.loads(REAL[0].read_text()).items() if k != key}
    with pytest.raises(MarkerError, match=f"the process marker has no '{key}'"):
        Marker.from_json(data, "where")


def test_a_marker_file_that_is_not_json_or_an_object_is_a_marker_error(tmp_path: Path) -> None:
    for text, words in (("[1, 2", "not readable JSON"), ("[1, 2]", "a JSON list, not an object")):
        path = tmp_path / "h-1.json"
        path.write_text(text)
        with pytest.raises(MarkerError, match=words):
            Marker.load(path)


def test_command_json_keeps_named_keys_only() -> None:
    assert set(COMMAND_KEYS) <= KEYS
    m = Marker.load(REAL[0])
    assert list(__import__("tracer.format.marker", fromlist=["command_json"]).command_json(m)) == list(COMMAND_KEYS)


HANDLERS = ("tracer/capture/session.py", "tracer/capture/launcher.py", "tracer/app/trace_run.py", "tracer/readers/job.py")
# Other JSON contracts that reuse a marker key's name for their own field: the job verdict's
# processes (JobProcess.to_json) and the verdict's process endings.
OTHER_CONTRACTS = {"tracer/readers/job.py": {"local_rank", "world_size", "fork_child"}, "tracer/analysis/ending.py": {"unflushed_s"}}
UNTRACED_RECORD = {"pid", "ppid"}  # command.json's untraced processes (the tree sampler's records) are looked up by these


def _strings(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _keyed(tree: ast.AST) -> set[str]:
    """Strings used as keys: `x["k"]` and `x.get("k")`."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            out.add(n.slice.value)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args \
                and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            out.add(n.args[0].value)
    return out


def test_no_module_but_the_format_names_a_marker_key() -> None:
    """The keys only a marker has appear as strings in tracer/format/marker.py alone (other
    contracts' fields of the same name aside); the modules that write and read markers look up
    no marker key by its string."""
    own = KEYS - SHARED_WORDS
    assert len(own) >= 15
    found = []
    for path in sorted((ROOT / "tracer").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "tracer/format/marker.py":
            continue
        tree = ast.parse(path.read_text())
        words = (_strings(tree) & own) - OTHER_CONTRACTS.get(rel, set())
        if rel in HANDLERS:
            words |= _keyed(tree) & (KEYS - UNTRACED_RECORD)
        found += [f"{rel}: {w!r}" for w in sorted(words)]
    assert not found, found
    assert all((ROOT / h).is_file() for h in HANDLERS)
