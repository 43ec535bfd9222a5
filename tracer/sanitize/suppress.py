"""Suppressions: known findings (third-party kernels, library probes) that are reported as
suppressed, by rule, and never silently dropped."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from tracer import resources
from tracer.errors import ProfileError
from tracer.workloads.profiles import Field, check_schema_version, load_yaml, validate
from tracer.sanitize.argv import Tool
from tracer.sanitize.model import Finding

DEFAULT_FILE = resources.SUPPRESSIONS_FILE
RULE_SCHEMA = {
    "id": Field(kind=str, required=True),
    "tool": Field(kind=str, required=True, choices=tuple(t.value for t in Tool) + ("any",)),
    "kind": Field(kind=str, default="*"),
    "kernel": Field(kind=str, required=True),
    "source": Field(kind=str, default="*"),
    "reason": Field(kind=str, required=True),
}


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str
    tool: str
    kind: str
    kernel: str
    source: str
    reason: str

    def matches(self, f: Finding) -> bool:
        return ((self.tool in ("any", f.tool)) and fnmatch.fnmatchcase(f.kind, self.kind)
                and fnmatch.fnmatchcase(f.kernel, self.kernel) and fnmatch.fnmatchcase(f.source or "", self.source))


def load_rules(path: Path) -> tuple[Rule, ...]:
    data = load_yaml(path)
    check_schema_version(str(path), data)
    top = validate(str(path), data, {"schema": Field(kind=int, required=True), "suppressions": Field(kind=list, default=[])})
    rules = []
    for i, item in enumerate(top["suppressions"]):
        rules.append(Rule(**validate(f"{path}: suppressions[{i}]", item, RULE_SCHEMA)))
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise ProfileError(f"{path}: suppression ids must be unique, got {ids}")
    return tuple(rules)


def apply(findings: tuple[Finding, ...], rules: tuple[Rule, ...]) -> tuple[tuple[Finding, ...], tuple[tuple[str, Finding], ...]]:
    """(kept, suppressed with the id of the first rule that matched)."""
    kept, suppressed = [], []
    for f in findings:
        rule = next((r for r in rules if r.matches(f)), None)
        if rule is None:
            kept.append(f)
        else:
            suppressed.append((rule.id, f))
    return tuple(kept), tuple(suppressed)
