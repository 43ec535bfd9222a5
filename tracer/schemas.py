"""The JSON contracts: every JSON document tracer writes for people and programs carries `schema`
(the version of its contract) and `kind`, and is described by a JSON Schema shipped in the wheel
(tracer/data/schemas/KIND.schema.json; docs/json.md lists them). The version changes only when a
field is removed or changes meaning; new fields are added to the schema file in the same commit
(tests/test_schemas.py validates real outputs against them)."""
from __future__ import annotations

from pathlib import Path

from tracer.resources import package_dir

VERSION = 1
KINDS = ("verdict", "job", "sanitize", "profile", "doctor")
PROFILE_KIND = "tracer-profile"  # profile.json's kind, older than this module


def header(kind: str) -> dict[str, object]:
    """The first two fields of a document of this kind."""
    return {"schema": VERSION, "kind": kind}


def schema_file(kind: str) -> Path:
    """The JSON Schema of a kind (verdict, job, sanitize, profile, doctor)."""
    if kind not in KINDS:
        raise ValueError(f"no schema for {kind!r} (known: {', '.join(KINDS)})")
    return package_dir() / "data" / "schemas" / f"{kind}.schema.json"
