"""The JSON contracts: every JSON document tracer writes for people and programs carries `schema`
(the version of its contract) and `kind` (which contract), and is described by a JSON Schema
shipped in the wheel (tracer/data/schemas/<file>.schema.json; docs/json.md lists them). A kind's
version changes only when a field is removed or changes meaning; new fields are added to the
schema file in the same commit (tests/test_schemas.py validates real outputs against them).
Readers accept older files without `schema` and `kind` where they did before."""
from __future__ import annotations

from pathlib import Path

from tracer.resources import package_dir

VERSION = 1  # the version of most kinds; VERSIONS names those past it
PROFILE_KIND = "tracer-profile"  # profile.json's kind, older than this module
# kind -> schema file stem
FILES = {
    "verdict": "verdict", "job": "job", "sanitize": "sanitize", PROFILE_KIND: "profile", "doctor": "doctor",
    "diff": "diff", "command": "command", "environment": "environment", "workload-run": "workload-run",
    "campaign-report": "campaign-report", "ablation": "ablation", "profile-compare": "profile-compare",
    "run-list": "run-list", "run-summary": "run-summary", "queued-job": "queued-job", "job-list": "job-list",
    "session": "session", "error": "error",
}
KINDS = tuple(FILES)
# 2: `kind` names the document ("diff", "workload-run"); in 1 it named what was compared / the
# workload's kind, now under `compared` / `workload_kind`
VERSIONS = {"diff": 2, "workload-run": 2}


def version(kind: str) -> int:
    return VERSIONS.get(kind, VERSION)


def header(kind: str) -> dict[str, object]:
    """The first two fields of a document of this kind."""
    if kind not in FILES:
        raise ValueError(f"no schema for {kind!r} (known: {', '.join(KINDS)})")
    return {"schema": version(kind), "kind": kind}


def with_header(kind: str, doc: dict[str, object]) -> dict[str, object]:
    """`doc` as a document of this kind: the header first, then its own fields (a `schema` or
    `kind` it carries, as an older file read back may, is replaced)."""
    return header(kind) | {k: v for k, v in doc.items() if k not in ("schema", "kind")}


def schema_file(kind: str) -> Path:
    """The JSON Schema of a kind (a document's `kind`; "profile" is accepted for tracer-profile)."""
    stem = FILES.get(PROFILE_KIND if kind == "profile" else kind)
    if stem is None:
        raise ValueError(f"no schema for {kind!r} (known: {', '.join(KINDS)})")
    return package_dir() / "data" / "schemas" / f"{stem}.schema.json"
