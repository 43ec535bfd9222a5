"""The process marker: `procs/<host>-<pid>[-r<RANK>].json`, which every traced process writes at
start and rewrites as it flushes and at exit (tracer/capture/session.py), `trace run` settles
(tracer/capture/launcher.py) and the job reader reads (tracer/readers/job.py). One frozen record,
one place for its keys (the field names), each key's JSON type checked on reading: an unknown,
missing or mistyped key is a MarkerError naming it. tracer/data/schemas/marker.schema.json is
made from the same table (`json_schema`; tests/test_format_marker.py keeps them equal).

`schema` is the contract's version. Markers written before the field existed (the fixtures under
tests/data/jobs) hold the same keys and are read as version 1."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from tracer.errors import TraceFormatError
from tracer.format.procs import Outcome
from tracer.store.inputs import load_json_object

SCHEMA_VERSION = 1


class MarkerError(TraceFormatError):
    """A process marker that is not one: unreadable, or a key unknown, missing or of the wrong type."""


class State(str, Enum):
    """Where the process stood when it last wrote its marker (or `trace run` settled it)."""

    EXITED = "exited"
    DIED = "died"  # settled by `trace run`: killed without exiting (SIGKILL, a crash)
    RUNNING = "running"  # started, not finished (or still running)
    DETACHED = "detached"  # traced until --stop-after, left running untraced
    CAPTURE_FAILED = "capture_failed"  # the session could not start: the process ran untraced


@dataclass(frozen=True)
class Kind:
    """A key's JSON type: a check and its words (in errors and the JSON Schema)."""

    words: str
    check: Callable[[Any], bool]
    schema: dict[str, Any]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _nullable(kind: Kind) -> Kind:
    types = kind.schema.get("type")
    schema = ({**kind.schema, "type": [types, "null"]} if isinstance(types, str) else
              {"anyOf": [kind.schema, {"type": "null"}]})
    return Kind(f"{kind.words} or null", lambda v: v is None or kind.check(v), schema)


INT = Kind("an integer", _int, {"type": "integer"})
STR = Kind("a string", lambda v: isinstance(v, str), {"type": "string"})
BOOL = Kind("true or false", lambda v: isinstance(v, bool), {"type": "boolean"})
NUMBER = Kind("a number", lambda v: _int(v) or isinstance(v, float), {"type": "number"})
OBJECT = Kind("an object", lambda v: isinstance(v, dict), {"type": "object"})
STRS = Kind("a list of strings", lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
            {"type": "array", "items": {"type": "string"}})
INTS = Kind("a list of integers", lambda v: isinstance(v, list) and all(map(_int, v)), {"type": "array", "items": {"type": "integer"}})
OBJECTS = Kind("a list of objects", lambda v: isinstance(v, list) and all(isinstance(d, dict) for d in v),
               {"type": "array", "items": {"type": "object"}})
CLOCK = Kind("[cupti_ns, unix_ns] (two integers)", lambda v: isinstance(v, list) and len(v) == 2 and all(map(_int, v)),
             {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2})


def _enum(cls: type[Enum]) -> Kind:
    values = [e.value for e in cls]
    return Kind(f"one of {', '.join(values)}", lambda v: v in values, {"enum": values})


def _key(kind: Kind, about: str, required: bool = False) -> dict[str, Any]:
    return {"kind": kind, "about": about, "required": required}


@dataclass(frozen=True, kw_only=True)
class Marker:
    """One process as its marker says. Field names are the JSON keys; `metadata` holds each
    key's type and meaning (the JSON Schema's descriptions)."""

    schema: int = field(default=SCHEMA_VERSION, metadata=_key(INT, "version of this contract (marker.schema.json)"))
    file: str = field(metadata=_key(STR, "the file stem: <host>-<pid>[-r<RANK>] (the reader takes it from the file name "
                                         "when absent)"))
    pid: int = field(metadata=_key(INT, "process id", required=True))
    ppid: int | None = field(default=None, metadata=_key(_nullable(INT), "parent process id"))
    host: str = field(metadata=_key(STR, "host name", required=True))
    rank: int | None = field(default=None, metadata=_key(_nullable(INT), "RANK (or SLURM_PROCID, OMPI, PMI)"))
    local_rank: int | None = field(default=None, metadata=_key(_nullable(INT), "LOCAL_RANK (or SLURM_LOCALID, OMPI)"))
    world_size: int | None = field(default=None, metadata=_key(_nullable(INT), "WORLD_SIZE (or SLURM_NTASKS, OMPI, PMI)"))
    fork_parent: int | None = field(default=None, metadata=_key(_nullable(INT), "pid of the parent a fork child came from"))
    fork_child: bool = field(default=False, metadata=_key(BOOL, "a fork child (its own session, nothing inherited)"))
    argv: tuple[str, ...] = field(default=(), metadata=_key(STRS, "the process's command line"))
    executable: str | None = field(default=None, metadata=_key(_nullable(STR), "sys.executable"))
    backend: str | None = field(default=None, metadata=_key(_nullable(STR), "capture backend (cupti, fake)"))
    memory: bool | None = field(default=None, metadata=_key(_nullable(BOOL), "--memory was on"))
    state: State = field(metadata=_key(_enum(State), "where the process stood", required=True))
    error: str | None = field(default=None, metadata=_key(_nullable(STR), "why the capture session did not start"))
    clock_start: tuple[int, int] | None = field(default=None, metadata=_key(_nullable(CLOCK), "clock pair at start"))
    clock_end: tuple[int, int] | None = field(default=None, metadata=_key(_nullable(CLOCK), "clock pair at exit"))
    cupti_started_by: str | None = field(default=None, metadata=_key(_nullable(STR), "what started CUPTI (its first CUDA use)"))
    cupti_error: str | None = field(default=None, metadata=_key(_nullable(STR), "why CUPTI did not start"))
    fatal_signals: tuple[int, ...] | None = field(default=None, metadata=_key(_nullable(INTS), "signals with a flush handler"))
    fatal_signal: int | None = field(default=None, metadata=_key(_nullable(INT), "the fatal signal it died of"))
    flushed_at_signal: bool = field(default=False, metadata=_key(BOOL, "its fatal-signal handler flushed"))
    kernels: int | None = field(default=None, metadata=_key(_nullable(INT), "kernels written to its trace so far"))
    flushed_kernels: dict[str, int] | None = field(default=None, metadata=_key(_nullable(OBJECT), "kernels per kind of flush"))
    last_flush_unix_ns: int | None = field(default=None, metadata=_key(_nullable(INT), "wall time of its last committed flush"))
    devices: tuple[dict[str, Any], ...] | None = field(default=None, metadata=_key(_nullable(OBJECTS),
                                                                                  "GPUs it held a context on"))
    timing: dict[str, Any] | None = field(default=None, metadata=_key(_nullable(OBJECT), "the capture's own seconds"))
    ended: str | None = field(default=None, metadata=_key(_nullable(STR), "how it ended: atexit, os._exit, sigterm, ..."))
    exit: int | None = field(default=None, metadata=_key(_nullable(INT), "its exit code"))
    exception: str | None = field(default=None, metadata=_key(_nullable(STR), "an uncaught exception"))
    dist_rank: int | None = field(default=None, metadata=_key(_nullable(INT), "torch.distributed's rank at exit"))
    trace: str | None = field(default=None, metadata=_key(_nullable(STR), "its trace file under procs/ (null: none)"))
    cuda: bool | None = field(default=None, metadata=_key(_nullable(BOOL), "it used CUDA"))
    trace_error: str | None = field(default=None, metadata=_key(_nullable(STR), "why the trace was not completed at exit"))
    untraced_cuda: str | None = field(default=None, metadata=_key(_nullable(STR), "CUDA was used but CUPTI never started"))
    errors: dict[str, str] | None = field(default=None, metadata=_key(_nullable(OBJECT), "capture errors by kind"))
    partial: str | None = field(default=None, metadata=_key(_nullable(STR), "set by trace run: why the trace is partial"))
    unflushed_s: float | None = field(default=None, metadata=_key(_nullable(NUMBER),
                                                                  "set by trace run: at most how long it ran unflushed"))
    outcome: Outcome | None = field(default=None, metadata=_key(_nullable(_enum(Outcome)),
                                                                "set by trace run: what it left to analyse"))

    def to_json(self) -> dict[str, Any]:
        """The marker as written: every key, in field order (lists for tuples, values for enums)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    def with_(self, **changes: Any) -> Marker:
        return replace(self, **changes)

    @classmethod
    def from_json(cls, data: Any, where: str = "a process marker", file: str | None = None) -> Marker:
        """A marker from its decoded JSON; `file` stands in for an absent `file` key. Raises
        MarkerError naming the first key that is unknown, missing or of the wrong type."""
        if not isinstance(data, dict):
            raise MarkerError(f"{where}: a process marker is a JSON object, not {type(data).__name__}")
        data = {"file": file, **data} if file is not None and "file" not in data else data
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise MarkerError(f"{where}: unknown key {unknown[0]!r} in a process marker (known: {', '.join(known)})")
        values: dict[str, Any] = {}
        for name, f in known.items():
            if name not in data:
                if f.metadata["required"] or name == "file":
                    raise MarkerError(f"{where}: the process marker has no {name!r}")
                continue
            kind: Kind = f.metadata["kind"]
            if not kind.check(data[name]):
                raise MarkerError(f"{where}: {name} {_shown(data[name])} is not {kind.words}" if kind.words.startswith("one of")
                                  else f"{where}: {name} must be {kind.words}, not {_shown(data[name])}")
            values[name] = _typed(name, data[name])
        if values.get("schema", SCHEMA_VERSION) > SCHEMA_VERSION:
            raise MarkerError(f"{where}: marker schema {values['schema']} is newer than this tracer reads ({SCHEMA_VERSION})")
        return cls(**values)

    @classmethod
    def load(cls, path: Path) -> Marker:
        """A marker file: read bounded (tracer.store.inputs), each key checked; `file` from the name."""
        return cls.from_json(load_json_object(path, "a process marker", error=MarkerError), str(path), path.stem)


# What command.json keeps of each settled marker (app/trace_run.py writes it).
COMMAND_KEYS = ("file", "pid", "ppid", "host", "rank", "local_rank", "world_size", "state", "ended", "exit", "kernels", "trace",
                "outcome", "fork_child", "untraced_cuda", "trace_error", "error", "fatal_signal", "flushed_at_signal",
                "last_flush_unix_ns", "unflushed_s")


def command_json(m: Marker) -> dict[str, Any]:
    full = m.to_json()
    return {k: full[k] for k in COMMAND_KEYS}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _typed(name: str, value: Any) -> Any:
    """JSON values as the record holds them: tuples for lists, enums for closed sets."""
    if name == "state":
        return State(value)
    if name == "outcome":
        return None if value is None else Outcome(value)
    if name == "devices" and value is not None:
        return tuple(value)
    return tuple(value) if isinstance(value, list) else value


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def json_schema() -> dict[str, Any]:
    """marker.schema.json, made from the fields above."""
    props = {"schema": {"type": "integer", "minimum": 1, "maximum": SCHEMA_VERSION,
                        "description": "version of this contract (marker.schema.json); absent in markers written before "
                                       "it existed (read as 1)"}}
    for f in fields(Marker):
        if f.name != "schema":
            props[f.name] = {**f.metadata["kind"].schema, "description": f.metadata["about"]}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "tracer/marker.schema.json",
            "title": "tracer process marker (RUN/procs/<host>-<pid>[-r<RANK>].json)",
            "description": "What one traced process says about itself: who it was, how far its capture got, how it ended. "
                           "Written by the process, settled by `trace run`, read by the job reader (tracer/format/marker.py).",
            "type": "object", "additionalProperties": False,
            "required": [f.name for f in fields(Marker) if f.metadata["required"]], "properties": props}
