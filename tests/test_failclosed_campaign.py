"""The campaign store fails closed: a file that is not a store is refused and left as it was,
status and report only read, one run at a time per store, temporary folders removed."""
from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _profile(tmp_path: Path, trials: int = 4) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(json.dumps({"schema": 1, "name": "t", "workload": "cpu_reference", "variants": ["none", "device_before_atomic"],
                             "trials_per_cell": trials, "batch": 2, "executor": {"tasks": 2}}))
    return p


ACTIONS = {
    "status": lambda store, tmp: ["campaign", "status", str(store)],
    "report": lambda store, tmp: ["campaign", "report", str(store)],
    "report-json": lambda store, tmp: ["campaign", "report", str(store), "--json"],
    "plot": lambda store, tmp: ["plot", "ablation", str(store), "-o", str(tmp / "a.png")],
    "run": lambda store, tmp: ["campaign", "run", str(_profile(tmp)), "-o", str(store), "--no-progress"],
}


@pytest.mark.parametrize("what", ["trace", "readme", "empty"])
@pytest.mark.parametrize("action", list(ACTIONS))
def test_a_file_that_is_not_a_store_is_refused_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         what: str, action: str) -> None:
    if what == "empty" and action == "run":
        pytest.skip("an empty file is a new store for `campaign run`")
    src = {"trace": DATA / "traces" / "event_ordered_dgrad.sqlite", "readme": ROOT / "README.md", "empty": None}[what]
    path = tmp_path / "x.sqlite"
    path.write_bytes(src.read_bytes() if src else b"")
    before = _digest(path)
    code = main(ACTIONS[action](path, tmp_path))
    err = capsys.readouterr().err
    assert code in (2, 6) and "Traceback" not in err and err.count("\n") == 1, err
    assert "not a campaign store" in err
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["x.sqlite"] + (["c.yaml"] if action == "run" else []))


def test_status_and_report_open_the_store_read_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    from tracer.campaign.grid import load_campaign
    from tracer.campaign.trials_db import Store

    store = Store.open(tmp_path / "s.sqlite", create=True)
    store.init(load_campaign(str(_profile(tmp_path))), {})
    store.con.close()
    (tmp_path / "s.sqlite").chmod(0o444)
    calls: list[str] = []
    real = sqlite3.connect

    def spy(database, *a, **kw):
        calls.append(str(database))
        return real(database, *a, **kw)

    import tracer.campaign.trials_db as store_mod

    monkey = pytest.MonkeyPatch()
    monkey.setattr(store_mod.sqlite3, "connect", spy)
    try:
        assert main(["campaign", "status", str(tmp_path / "s.sqlite")]) == 0
        assert main(["campaign", "report", str(tmp_path / "s.sqlite"), "--json"]) == 0
    finally:
        monkey.undo()
    assert calls and all(c.endswith("?mode=ro") for c in calls), calls
    assert "campaign t" in capsys.readouterr().out


def test_a_second_run_on_a_store_in_flight_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.campaign.grid import load_campaign
    from tracer.campaign.trials_db import Store

    profile = _profile(tmp_path)
    first = Store.open(tmp_path / "s.sqlite", create=True, exclusive=True)  # the first run, still going
    first.init(load_campaign(str(profile)), {})
    code = main(["campaign", "run", str(profile), "-o", str(tmp_path / "s.sqlite"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "is in flight: another `campaign run` holds it (pid" in err and err.count("\n") == 1
    assert first.con.execute("SELECT count(*) FROM trials").fetchone()[0] == 0  # the second ran nothing
    first.lock.release()  # type: ignore[union-attr]  # the first store holds the lock at this point
    assert main(["campaign", "run", str(profile), "-o", str(tmp_path / "s.sqlite"), "--no-progress"]) == 0
    assert first.con.execute("SELECT count(*) FROM trials").fetchone()[0] == 8


def test_temporary_folders_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert main(["campaign", "run", str(_profile(tmp_path)), "-o", str(tmp_path / "s.sqlite"), "--no-progress", "--workers", "2"]) == 0
    assert list(scratch.iterdir()) == []
    shutil.rmtree(scratch)
