"""A full disk: every output site ends in one line and exit 9 (OutputError), leaves no temporary
file, and leaves the campaign store as it was. The fault is real: the command runs in a child
whose file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes every write past a few hundred bytes
fail with EFBIG, as a full disk fails with ENOSPC; the rename path is covered in-process."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA
from tracer.errors import OutputError
from tracer.store import atomic

ROOT = Path(__file__).resolve().parent.parent
CTD = DATA / "traces" / "cast_transpose_dgrad.sqlite"
DEMO = ROOT / "tracer" / "data" / "demo"
LIMIT = 512  # bytes a file may grow to in the child
CHILD = ("import contextlib, io, json, resource, signal, sys\n"
         "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
         f"resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, {LIMIT}))\n"
         "from tracer.cli import main\n"
         "results = []\n"
         "for argv in json.loads(sys.argv[1]):\n"
         "    err = io.StringIO()\n"
         "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
         "        try:\n"
         "            code = main(argv)\n"
         "        except BaseException as exc:\n"
         "            code, _ = -1, err.write(f'Traceback: {exc!r}')\n"
         "    results.append([code, err.getvalue()])\n"
         "print('RESULTS' + json.dumps(results))\n")


def _full_disk(*commands: list[str]) -> list[tuple[int, str]]:
    """Each command run by tracer.cli.main in one child under the file-size limit: (exit, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(commands)], capture_output=True, text=True,
                         timeout=600, env=env, cwd=ROOT)
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULTS")), None)
    assert line is not None, res.stderr[-3000:]
    return [(code, err) for code, err in json.loads(line[len("RESULTS"):])]


SITES = {
    "plot stream-timeline": lambda out: ["plot", "stream-timeline", str(CTD), "-o", str(out / "t.png")],
    "plot verdicts": lambda out: ["plot", "verdicts", str(DEMO / "sanitize"), "-o", str(out / "v.png")],
    "plot ablation": lambda out: ["plot", "ablation", str(DEMO / "campaign.json"), "-o", str(out / "a.svg")],
    "report": lambda out: ["report", str(CTD), "-o", str(out / "r.html")],
    "trace export": lambda out: ["trace", "export", str(CTD), "--perfetto", "-o", str(out / "p.json")],
    "trace import": lambda out: ["trace", "import", str(CTD), "-o", str(out / "run")],
    "sanitize --junit": lambda out: ["sanitize", "import", str(DATA / "sanitizer" / "unfiltered-1024" / "memcheck-planted_oob.xml"),
                                     "--junit", str(out / "j.xml")],
    "sanitize --sarif": lambda out: ["sanitize", "import", str(DATA / "sanitizer" / "unfiltered-1024" / "memcheck-planted_oob.xml"),
                                     "--sarif", str(out / "s.sarif")],
}


@pytest.fixture(scope="module")
def full_disk_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, str]]:
    outs = {site: tmp_path_factory.mktemp("out") for site in SITES}
    results = _full_disk(*(SITES[site](out) for site, out in outs.items()))
    return {site: (outs[site], code, err) for site, (code, err) in zip(SITES, results)}


@pytest.mark.parametrize("site", list(SITES))
def test_full_disk_is_one_line_exit_9_and_nothing_half_written(full_disk_runs: dict, site: str) -> None:
    out, code, err = full_disk_runs[site]
    assert code == 9, err[-2000:]
    assert err.startswith("tracer: error: cannot write") and err.count("\n") == 1 and "File too large" in err
    assert str(out) in err and ".partial-" not in err and ".tmp-" not in err  # the final path, not a temporary name
    assert list(out.iterdir()) == []


def test_control_the_same_commands_work_without_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    out = tmp_path / "out"
    out.mkdir()
    for site in ("plot ablation", "trace export", "sanitize --junit"):
        assert main(SITES[site](out)) in (0, 1), site
    assert sorted(p.name for p in out.iterdir()) == ["a.svg", "j.xml", "p.json"]


def test_campaign_run_on_a_full_disk_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    from tracer.campaign.grid import load_campaign
    from tracer.campaign.trials_db import Store, TrialRow

    profile = tmp_path / "c.yaml"
    data = {"schema": 1, "name": "t", "workload": "cpu_reference", "variants": ["none", "device_before_atomic"], "trials_per_cell": 4}
    profile.write_text(json.dumps(data))
    store = Store.open(tmp_path / "s.sqlite", create=True)
    store.init(load_campaign(str(profile)), {})
    store.add_trials([TrialRow(cell_id=1, trial=t, failed=False, crashed=False, first_failure=None, failed_checks="", gpu="cpu0", worker="w",
                               seconds=0.1) for t in range(3)])
    store.con.close()
    profile.write_text(json.dumps(data | {"trials_per_cell": 50}))
    [(code, err)] = _full_disk(["campaign", "run", str(profile), "-o", str(tmp_path / "s.sqlite"), "--no-progress", "--workers", "1"])
    assert code == 9, err[-2000:]
    assert err.startswith("tracer: error: cannot") and "campaign store" in err and err.count("\n") == 1
    after = Store.open(tmp_path / "s.sqlite", readonly=True)
    assert after.done_trials(1) == {0, 1, 2} and after.done_trials(2) == set()
    assert [t for _, _, t in after.cells()] == [4, 4]  # the new profile's target was not half-applied


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_a_failed_rename_removes_the_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    def refuse(src: object, dst: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(OutputError, match=f"cannot write {tmp_path / 'x.json'}: {os.strerror(code)}"):
        atomic.write_json(tmp_path / "x.json", {"a": 1})
    assert list(tmp_path.iterdir()) == []


def test_an_error_while_writing_removes_the_temporary_file(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with atomic.atomic_output(tmp_path / "x.png") as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("the writer failed")
    assert list(tmp_path.iterdir()) == []


def test_staged_run_on_a_full_disk_is_removed(tmp_path: Path) -> None:
    from tracer.store.rundir import staged

    with pytest.raises(OutputError):
        with staged(tmp_path / "run") as tmp:
            (tmp / "command.json").write_text("{}")
            raise OutputError("cannot write trace.sqlite: No space left on device")
    assert list(tmp_path.iterdir()) == []
