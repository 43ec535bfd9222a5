"""The manual (docs/, built with MkDocs): it builds with --strict (no broken link, anchor or page
left out of the nav), and docs/cli.md is what scripts/gen_cli_reference.py makes from the parsers
today, so a new option or command cannot be missing from the CLI reference."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from gen_cli_reference import OUT, reference


def test_cli_reference_is_current() -> None:
    assert OUT.read_text() == reference(), "docs/cli.md is stale: run python scripts/gen_cli_reference.py"


def test_cli_reference_names_every_command_and_option() -> None:
    from tracer.cli import build_parser
    from tracer.helptext import walk

    text = OUT.read_text()
    for name, parser in walk(build_parser()):
        assert f"## tracer {name}".rstrip() + "\n" in text
        for action in parser._actions:
            for flag in (f for f in action.option_strings if f not in ("-h", "--help")):
                assert f"`{flag}" in text or f", {flag}" in text, (name, flag)


def test_site_builds_strict(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    pages = {p.parent.name for p in (tmp_path / "site").rglob("index.html")}
    assert {"concepts", "cli", "json", "troubleshooting", "faq", "trace", "sanitize", "benchmarks"} <= pages


def test_every_docs_page_is_in_the_nav() -> None:
    import yaml

    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert yaml.safe_load(nav)["docs_dir"] == "docs"
    missing = sorted(p for p in pages if p not in nav)
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"
