"""On a GPU: the sanitizer selftest matrix, and every fence variant clean under all four tools."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tracer.cli import main
from tracer.kernel.spec import FENCE_VARIANTS

pytestmark = pytest.mark.gpu
RESULTS = Path(os.environ.get("TRACER_RESULTS", "/tmp"))


def test_selftest_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sanitize", "selftest", "--jobs", "10", "-o", str(tmp_path / "s")])
    out = capsys.readouterr().out
    (RESULTS / "selftest.txt").write_text(out)
    (RESULTS / "selftest_report.json").write_text((tmp_path / "s" / "report.json").read_text())
    assert code == 0, out
    assert "every planted defect caught" in out


def test_every_fence_variant_clean_under_all_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variants = [a for v in FENCE_VARIANTS for a in ("--variant", v.value)]
    code = main(["sanitize", "--tool", "all", "cast_transpose_dgrad", *variants, "--shape", "256x256x256",
                 "--jobs", "12", "-o", str(tmp_path / "v"), "--json"])
    report = json.loads(capsys.readouterr().out)
    (RESULTS / "sanitize-fence-variants.json").write_text(json.dumps(report, indent=1))
    assert code == 0, [(r["workload"], r["tool"], r["verdict"], r["findings"]) for r in report["runs"] if r["verdict"] != "clean"]
    assert len(report["runs"]) == 4 * len(FENCE_VARIANTS)


def test_filter_that_matches_nothing_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sanitize", "--tool", "memcheck", "cast_transpose_dgrad", "--shape", "256x256x256",
                 "--only-kernel", "no_such_kernel", "-o", str(tmp_path / "f")])
    assert code == 2 and "matched none of the" in capsys.readouterr().err
