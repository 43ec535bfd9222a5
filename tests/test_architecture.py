"""The layering rules of tracer/ on its import graph (scripts/import_graph.py, stdlib ast): no
import cycle, no arrow from a reading module (readers, analysis, plots, report) to a recording one
(capture, the kernel launcher, the process runner, torch, cuda.core), no command importing
another, no heavy import at start-up, and thin command modules."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]  # the spec of a file that exists is never None
    sys.modules["import_graph"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)  # type: ignore[union-attr]  # a source file's spec always has a loader
    return module


def test_tracer_keeps_its_layering_rules() -> None:
    assert _graph().breaches() == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "tracer" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in {p.parent for p in (tmp_path / "tracer").rglob("*.py")}:
        (folder / "__init__.py").touch()
    return tmp_path


@pytest.mark.parametrize("files,breach", [
    ({"a.py": "from tracer import b\n", "b.py": "def f():\n    import tracer.a\n"}, "import cycle: tracer.a -> tracer.b -> tracer.a"),
    ({"analysis/x.py": "def f():\n    from tracer.capture import cupti\n", "capture/cupti.py": ""},
     "reading module imports recording: tracer.analysis.x -> tracer.capture.cupti"),
    ({"views/plots/p.py": "from tracer import helper\n", "helper.py": "import torch\n"},
     "reading module imports recording: tracer.views.plots.p -> tracer.helper -> torch"),
    ({"commands/a.py": "from tracer.commands.b import x\n", "commands/b.py": "x = 1\n"},
     "command imports command: tracer.commands.a -> tracer.commands.b"),
    ({"cli.py": "from tracer.commands import a\n", "commands/a.py": "from scipy import stats\n"},
     "start-up imports scipy: tracer.cli -> tracer.commands.a -> scipy"),
    ({"cli.py": "", "commands/a.py": "from scipy import stats\n"},  # cli imports command modules by name
     "start-up imports scipy: tracer.commands.a -> scipy"),
    ({"commands/long.py": "x = 1\n" * 101}, "command module over 100 lines: tracer/commands/long.py (101)"),
    ({"a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tracer import b\n", "b.py": "from tracer import a\n"},
     "import cycle: tracer.a -> tracer.b -> tracer.a"),
    ({"p/a.py": "def f():\n    from tracer.q import b\n", "q/b.py": "from tracer.p import c\n", "p/c.py": ""},
     "package cycle: tracer.p -> tracer.q -> tracer.p"),
    ({"capture/x.py": "def f():\n    from tracer.analysis import y\n", "analysis/y.py": ""},
     "capture imports tracer.analysis: tracer.capture.x -> tracer.analysis.y (lazy)"),
    ({"capture/x.py": "from tracer import artifact\n", "artifact.py": ""}, "capture imports tracer.artifact"),
    ({"analysis/x.py": "from tracer.app import run\n", "app/run.py": ""},
     "only commands and the service import tracer.app: tracer.analysis.x -> tracer.app.run"),
    ({"format/m.py": "from tracer.analysis import y\n", "analysis/y.py": ""}, "tracer.format imports tracer.analysis.y"),
])
def test_each_rule_catches_its_breach(tmp_path: Path, files: dict[str, str], breach: str) -> None:
    found = _graph().breaches(_tree(tmp_path, files))
    assert any(b.startswith(breach) for b in found), found


def test_commands_and_the_service_may_use_the_app_layer(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"commands/t.py": "from tracer.app import run\n", "serve/s.py": "from tracer.app import run\n",
                            "app/run.py": "from tracer.capture import c\nfrom tracer.format import f\n",
                            "capture/c.py": "from tracer.format import f\n",
                            "format/f.py": "from tracer.errors import E\n", "errors.py": "E = 1\n"})
    assert _graph().breaches(root) == []


def test_type_checking_imports_and_deep_lazy_imports_are_not_arrows(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "analysis/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\nfrom tracer import y\n",
        "y.py": "def f():\n    import torch\n",  # runs only when y.f is called: y's own business
    })
    assert _graph().breaches(root) == []


def test_no_raw_sql_on_a_campaign_store_outside_the_store() -> None:
    allowed = {ROOT / "tracer" / "campaign" / "trials_db.py", ROOT / "tracer" / "campaign" / "schema.py"}
    trace_readers = ROOT / "tracer" / "readers"  # their SQL reads trace files, never a campaign store
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tracer").rglob("*.py")
                 if p not in allowed and trace_readers not in p.parents
                 and re.search(r"store\.con\b|\.con\.execute", p.read_text())]
    assert offenders == []


def test_the_architecture_page_names_every_package() -> None:
    """docs/design/architecture.md is the map: a package or top-level module added without a line
    there fails here."""
    page = (ROOT / "docs" / "design" / "architecture.md").read_text()
    tracer = ROOT / "tracer"
    names = [f"tracer/{p.name}/" for p in tracer.iterdir() if (p / "__init__.py").is_file()]
    names += [f"tracer/{p.name}" for p in tracer.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert sorted(n for n in names if f"`{n}`" not in page) == []
