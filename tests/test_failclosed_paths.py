"""File names and output paths: a name is never read as a URI (`run%41.sqlite` is not runA.sqlite,
`?` and `#` open the very file and create nothing), an output is never one of the command's inputs
(through symlinks and hard links too), never a device, FIFO or directory replaced by rename, a long
name is one line and its temp name fits NAME_MAX; a campaign's name stays a file name under runs/.
SQLite open failures say what they are: a lock, a hot journal, a WAL file in a read-only folder."""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.trace_synthetic import hot_journal
from tracer.cli import main
from tracer.errors import TraceFormatError
from tracer.store.atomic import temp_name
from tracer.store.outpath import name_max
from tracer.store.sqlite_open import Mode, open_error, open_sqlite
from tracer.readers.sqlite_tables import connect

CTD = DATA / "traces" / "cast_transpose_dgrad.sqlite"
PLANTED = DATA / "traces" / "planted_cross_stream.sqlite"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_percent_escapes_in_a_name_are_that_file_not_another(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """run%41.sqlite beside runA.sqlite: each gives its own verdict (they hold different traces)."""
    shutil.copy(CTD, tmp_path / "runA.sqlite")
    shutil.copy(PLANTED, tmp_path / "run%41.sqlite")
    verdicts = {}
    for name in ("runA.sqlite", "run%41.sqlite"):
        code, out, _ = _run(["trace", "analyze", str(tmp_path / name)], capsys)
        verdicts[name] = out.splitlines()[1:4]
        assert out.startswith(f"{tmp_path / name}:")
    assert verdicts["runA.sqlite"] != verdicts["run%41.sqlite"]
    code, _, err = _run(["trace", "analyze", str(tmp_path / "run%42.sqlite")], capsys)
    assert code == 6 and "no such file" in err  # %42 is 'B': there is no runB.sqlite either, and none is made


@pytest.mark.parametrize("name", ["a?mode=rwc.sqlite", "b#frag.sqlite", "c?x#y.sqlite", "file:d.sqlite", "e%3F.sqlite"])
def test_query_and_fragment_characters_open_that_file_and_create_nothing(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(CTD, tmp_path / name)
    before = sorted(os.listdir(tmp_path))
    code, out, _ = _run(["trace", "analyze", str(tmp_path / name)], capsys)
    assert code == 0 and "UNORDERED" in out
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(["trace", "analyze", name], capsys)  # relative: `file:d.sqlite` too
    assert code == 0 and "UNORDERED" in out
    assert sorted(os.listdir(tmp_path)) == before
    missing = tmp_path / ("missing" + name)
    code, _, err = _run(["trace", "analyze", str(missing)], capsys)
    assert code == 6 and not missing.exists() and sorted(os.listdir(tmp_path)) == before


def test_every_sqlite_open_goes_through_the_one_opener() -> None:
    root = Path(__file__).resolve().parent.parent / "tracer"
    raw = [str(p.relative_to(root)) for p in root.rglob("*.py")
           if p.name != "sqlite_open.py" and "sqlite3.connect(" in p.read_text()]
    assert raw == []


def test_a_campaign_store_named_with_uri_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s?mode=ro#x.sqlite"
    prof = tmp_path / "c.yaml"
    prof.write_text("schema: 1\nname: tiny\nworkload: cpu_reference\ntrials_per_cell: 2\nbatch: 2\n"
                    "executor: {kind: local, tasks: 1}\n")
    code, _, err = _run(["campaign", "run", str(prof), "-o", str(store), "--no-progress", "--workers", "1"], capsys)
    assert code == 0, err
    made = sorted(p.name for p in tmp_path.iterdir() if p != prof)
    assert made and all(name.startswith(store.name) for name in made), made  # the store, its -wal, -shm, .lock
    code, out, _ = _run(["campaign", "status", str(store)], capsys)
    assert code == 0 and "tiny" in out


# -- the output guard --------------------------------------------------------------------------

def _outputs_over(src: Path, out: Path) -> list[list[str]]:
    return [["report", str(src), "-o", str(out)], ["trace", "export", str(src), "--perfetto", "-o", str(out)],
            ["plot", "stream-timeline", str(src), "-o", str(out)]]


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "dotted"])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path: Path, how: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "t.sqlite"
    shutil.copy(CTD, src)
    out = {"same": src, "symlink": tmp_path / "t.png", "hardlink": tmp_path / "h.png",
           "dotted": tmp_path / "x" / ".." / "t.sqlite"}[how]
    (tmp_path / "x").mkdir()
    if how == "symlink":
        out.symlink_to(src)
    elif how == "hardlink":
        os.link(src, out)
    data = src.read_bytes()
    for argv in _outputs_over(src, out):
        code, _, err = _run(argv, capsys)
        assert code == 2 and "is the input" in err and err.count("\n") == 1, (argv, err)
    assert src.read_bytes() == data
    xml = DATA / "sanitizer" / "unfiltered-1024" / "memcheck-planted_oob.xml"
    copy = tmp_path / "m.xml"
    shutil.copy(xml, copy)
    for flag in ("--junit", "--sarif"):
        code, _, err = _run(["sanitize", "import", str(copy), flag, str(copy)], capsys)
        assert code == 2 and "is the input" in err
    assert copy.read_bytes() == xml.read_bytes()


def test_a_report_never_overwrites_a_file_of_an_input_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(CTD, run / "trace.sqlite")
    code, _, err = _run(["report", str(run), "-o", str(run / "trace.sqlite")], capsys)
    assert code == 2 and "is the input" in err
    assert (run / "trace.sqlite").read_bytes() == CTD.read_bytes()


@pytest.mark.parametrize("kind", ["fifo", "directory", "chardev", "symlink-to-chardev"])
def test_an_output_that_is_not_a_regular_file_is_refused_untouched(tmp_path: Path, kind: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.html"
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "directory":
        out.mkdir()
    elif kind == "symlink-to-chardev":
        out.symlink_to("/dev/null")
    else:
        out = Path("/dev/null")
    words = {"fifo": "is a FIFO", "directory": "is a directory"}.get(kind, "is a character device")
    for argv in (["report", str(CTD), "-o", str(out)], ["trace", "export", str(CTD), "--perfetto", "-o", str(out)],
                 ["sanitize", "import", str(DATA / "sanitizer" / "unfiltered-1024" / "memcheck-clean.xml"), "--junit", str(out)]):
        code, _, err = _run(argv, capsys)
        assert code == 2 and words in err and err.count("\n") == 1, (argv, err)
    assert Path("/dev/null").is_char_device()
    if kind == "fifo":
        assert out.is_fifo()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_a_long_output_name_fits_name_max_through_its_temp_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    longest = name_max(tmp_path)
    ok = tmp_path / ("r" * (longest - 5) + ".html")
    assert len(ok.name.encode()) == longest
    assert len(temp_name(ok).name.encode()) <= longest
    code, _, err = _run(["report", str(CTD), "-o", str(ok)], capsys)
    assert code == 0 and ok.is_file(), err
    over = tmp_path / ("r" * longest + ".html")
    code, _, err = _run(["report", str(CTD), "-o", str(over)], capsys)
    assert code == 2 and f"at most {longest}" in err and err.count("\n") == 1
    wide = tmp_path / ("é" * ((longest - 5) // 2) + ".svg")  # two bytes each
    assert len(temp_name(wide).name.encode()) <= longest and temp_name(wide).suffix == ".svg"


@pytest.mark.parametrize("name", ["/tmp/evil", "../evil", "a/b", "..", ".hidden", "a\\b", "x" * 101, ""])
def test_a_campaign_name_must_be_a_plain_file_name(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    prof = tmp_path / "c.yaml"
    prof.write_text(f"schema: 1\nname: '{name}'\nworkload: cpu_reference\ntrials_per_cell: 1\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(["campaign", "run", str(prof), "--no-progress"], capsys)
    assert code == 2 and "key 'name'" in err and "plain file name" in err
    assert not (tmp_path / "runs").exists() and not Path("/tmp/evil.campaign.sqlite").exists()


# -- SQLite open failures ----------------------------------------------------------------------

def test_a_lock_held_by_another_process_is_said_promptly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.sqlite"
    shutil.copy(CTD, db)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        start = time.monotonic()
        code, _, err = _run(["trace", "analyze", str(db)], capsys)
        took = time.monotonic() - start
    finally:
        holder.close()
    assert code == 6 and "locked by another process" in err and "corrupt" not in err
    assert took < 5, took
    code, _, _ = _run(["trace", "analyze", str(db)], capsys)
    assert code == 0


def test_a_hot_journal_is_named_not_called_corrupt(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    hot_journal(tmp_path, snap)
    with pytest.raises(TraceFormatError, match="hot journal") as info:
        connect(snap / "h.sqlite")
    assert "corrupt" not in str(info.value)


def test_real_corruption_stays_corrupt(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    data = bytearray(CTD.read_bytes())
    data[100:4096] = bytes(4096 - 100)  # the schema page zeroed after the header
    db.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="corrupt"):
        con = connect(db)
        con.execute("SELECT * FROM sqlite_master").fetchall()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user (nobody) in a child")
def test_a_wal_database_in_a_read_only_folder_says_how_to_fix() -> None:
    top = Path(tempfile.mkdtemp(prefix="tracer-wal-"))  # pytest's own tmp folders are closed to other users
    try:
        message = _open_as_nobody(_wal_in_read_only_folder(top))
    finally:
        os.chmod(top / "ro", 0o755)
        shutil.rmtree(top)
    assert "WAL" in message and "read-only" in message and "journal_mode=DELETE" in message and "corrupt" not in message


def _wal_in_read_only_folder(top: Path) -> Path:
    folder = top / "ro"
    folder.mkdir()
    db = folder / "w.sqlite"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    os.chmod(top, 0o755)
    os.chmod(db, 0o444)
    os.chmod(folder, 0o555)
    return db


def _open_as_nobody(db: Path) -> str:
    """What opening db says in a child that runs as user nobody."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        message = "opened"
        try:
            os.setgid(65534)
            os.setuid(65534)
            open_sqlite(db, Mode.READ).execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            message = str(open_error(db, exc))
        except BaseException as exc:  # reported to the parent, which fails the test
            message = repr(exc)
        finally:
            os.write(write, message.encode())
            os._exit(0)
    os.close(write)
    message = os.read(read, 4096).decode()
    os.waitpid(pid, 0)
    return message
