"""Draft a JSON Schema (draft 2020-12) for one kind of tracer's JSON from real outputs of it: the
types seen at each field (null only where a sample held null), the keys every sample had as
`required`, objects closed (`additionalProperties: false`) except the paths given with --map, whose
keys are data (a count per verdict, a value per variant). The draft is then read and tightened by
hand (consts, enums, descriptions) before it goes into tracer/data/schemas/; tests/test_schemas.py
validates real outputs against the file, never against a fresh draft.

    python scripts/draft_schema.py KIND "TITLE" "DESCRIPTION" SAMPLE.json... [--map PATH]... > FILE
    (PATH: field names joined by '/', '*' for array items, e.g. pairs/counts_a or cells/*/gpus)"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tracer.schemas import FILES, version

TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"),
         (type(None), "null"))


def type_name(value: Any) -> str:
    return next(name for t, name in TYPES if isinstance(value, t))


def draft(values: list[Any], path: str, maps: set[str]) -> dict[str, Any]:
    types = sorted({type_name(v) for v in values})
    if "integer" in types and "number" in types:
        types.remove("integer")
    out: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
    objects = [v for v in values if isinstance(v, dict)]
    arrays = [v for v in values if isinstance(v, list)]
    if objects and path in maps:
        inner = [x for o in objects for x in o.values()]
        out["additionalProperties"] = draft(inner, f"{path}/*", maps) if inner else {}
    elif objects:
        keys = list(dict.fromkeys(k for o in objects for k in o))
        out["required"] = [k for k in keys if all(k in o for o in objects)]
        out["properties"] = {k: draft([o[k] for o in objects if k in o], f"{path}/{k}".lstrip("/"), maps) for k in keys}
        out["additionalProperties"] = False
    if arrays:
        items = [x for a in arrays for x in a]
        if items:
            out["items"] = draft(items, f"{path}/*".lstrip("/"), maps)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=sorted(FILES))
    ap.add_argument("title")
    ap.add_argument("description")
    ap.add_argument("samples", nargs="+", type=Path)
    ap.add_argument("--map", action="append", default=[], help="a path whose object keys are data")
    args = ap.parse_args()
    docs = [json.loads(p.read_text()) for p in args.samples]
    body = draft(docs, "", set(args.map))
    body["properties"]["schema"] = {"const": version(args.kind), "description": (
        f"version of this contract ({FILES[args.kind]}.schema.json); it changes only when a field is removed or changes meaning")}
    body["properties"]["kind"] = {"const": args.kind}
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"tracer/{FILES[args.kind]}.schema.json",
              "title": args.title, "description": args.description, **body}
    json.dump(schema, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
