"""Every silenced checker warning says why: a mypy ignore names its error codes and is followed by
`# reason`, a ruff noqa names its rule codes and is followed by a reason (` - why`, `# why` or
`(why)`). Comments are read with tokenize, so strings that merely contain the markers are not
counted."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("tracer", "scripts", "tests")
TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)")
NOQA = re.compile(r"#\s*noqa(?P<codes>:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?(?P<rest>.*)", re.IGNORECASE)
REASON = re.compile(r"^\s*(#|-|\(|:)\s*\w+(\W+\w+)+")  # a separator, then at least two words


def bare_suppressions(source: str, name: str) -> list[str]:
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        for pattern in (TYPE_IGNORE, NOQA):
            m = pattern.search(tok.string)
            if m and not (m["codes"] and REASON.match(m["rest"])):
                out.append(f"{name}:{tok.start[0]}: {tok.string}")
    return out


def test_every_type_ignore_and_noqa_carries_codes_and_a_reason() -> None:
    found = [hit for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
             for hit in bare_suppressions(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], ("say which codes and why, e.g. `# type: ignore[attr-defined]  # typeshed lacks it` "
                         "or `# noqa: E402 - after sys.path is set`:\n" + "\n".join(found))


@pytest.mark.parametrize("line,bare", [
    ("x = 1  # type: ignore\n", True),
    ("x = 1  # type: ignore[assignment]\n", True),
    ("x = 1  # type: ignore[assignment]  # ok\n", True),
    ("x = 1  # type: ignore[assignment]  # numpy's stubs say Any\n", False),
    ("import os  # noqa\n", True),
    ("import os  # noqa: F401\n", True),
    ("import os  # noqa: F401 - loaded for its side effect\n", False),
    ("import os  # noqa: F401  # loaded for its side effect\n", False),
    ("import os  # noqa: F401 (re-exported here)\n", False),
    ("s = '# type: ignore'  # a string, not a comment\n", False),
])
def test_the_check_flags_bare_suppressions_and_only_those(line: str, bare: bool) -> None:
    assert bool(bare_suppressions(line, "t.py")) is bare
