"""Pair specs: parsed from --pairs and --producer/--consumer, stored structured in verdict.json,
old joined strings still read."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.errors import TraceFormatError, UsageError
from tracer.analysis.pairs import PairMode, PairSpec

CTD = DATA / "traces" / "cast_transpose_dgrad.sqlite"


def test_pairs_and_producer_consumer_options_combine_in_order() -> None:
    spec = PairSpec.from_args(["*/cast_transpose:*/dgrad"], ["aten::mm"], ["*/wgrad"])
    assert spec.mode is PairMode.GLOBS
    assert spec.globs == (("*/cast_transpose", "*/dgrad"), ("aten::mm", "*/wgrad"))
    assert spec.to_json() == {"mode": "globs", "globs": [["*/cast_transpose", "*/dgrad"], ["aten::mm", "*/wgrad"]]}


def test_default_is_the_given_spec_else_all() -> None:
    given = PairSpec.of([("a", "b")])
    assert PairSpec.from_args(None, None, None, given) == given
    assert PairSpec.from_args(None, None, None, PairSpec.of([])).mode is PairMode.ALL
    assert PairSpec.from_args(["all"]).to_json() == {"mode": "all", "globs": []}


@pytest.mark.parametrize("args, message", [
    ((["aten::mm:x"],), "names with '::' go in --producer"),
    ((["nocolon"],), "PRODUCER_GLOB:CONSUMER_GLOB"),
    ((None, ["a"], []), "--producer given 1 time"),
    ((["all", "a:b"],), "give it alone"),
])
def test_bad_specs_are_usage_errors(args: tuple, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        PairSpec.from_args(*args)


@pytest.mark.parametrize("stored, expected", [
    ("all", PairSpec(PairMode.ALL)),
    ("none", PairSpec(PairMode.NONE)),
    ("*/a:*/b, */c:*/d", PairSpec.of([("*/a", "*/b"), ("*/c", "*/d")])),
    ({"mode": "globs", "globs": [["aten::mm", "*"]]}, PairSpec.of([("aten::mm", "*")])),
    ({"mode": "all", "globs": []}, PairSpec(PairMode.ALL)),
])
def test_from_json_reads_structured_and_old_joined_forms(stored: object, expected: PairSpec) -> None:
    assert PairSpec.from_json(stored) == expected
    assert PairSpec.from_json(expected.to_json()) == expected


@pytest.mark.parametrize("bad", [{"mode": "some"}, {"mode": "globs", "globs": [["a"]]}, 7])
def test_from_json_rejects_foreign_values(bad: object) -> None:
    with pytest.raises(TraceFormatError, match="pair_spec"):  # a stored value: a bad input file (exit 6)
        PairSpec.from_json(bad)


def test_cli_producer_consumer_and_structured_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    assert main(["trace", "analyze", str(CTD), "--producer", "*/cast_transpose", "--consumer", "*/dgrad", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pair_spec"] == {"mode": "globs", "globs": [["*/cast_transpose", "*/dgrad"]]}
    assert out["pair_counts"]["same-stream"] == 2
    assert main(["trace", "analyze", str(CTD), "--producer", "*/cast_transpose"]) == 2
    assert "--consumer 0" in capsys.readouterr().err


def test_run_directory_with_an_old_joined_pair_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run directory written before the structured form: its glob pairs are used again."""
    from tracer.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "trace.sqlite").write_bytes(CTD.read_bytes())
    (run / "verdict.json").write_text(json.dumps({"pair_spec": "*/cast_transpose:*/dgrad"}))
    assert main(["trace", "analyze", str(run), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pair_spec"]["globs"] == [["*/cast_transpose", "*/dgrad"]] and out["pair_counts"]["same-stream"] == 2
