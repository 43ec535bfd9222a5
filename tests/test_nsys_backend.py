"""The nsys backend's plumbing on a CPU machine: which nsys writes reports and why not (the
importer beside nsys, probed with ldd), the elfutils libraries tracer prepares from a drgn wheel,
LD_LIBRARY_PATH for the nsys child only, and `trace run --backend nsys` / `trace import X.nsys-rep`
through a fake nsys that hands back a real H200 capture (tests/data/nsys)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import fake_tools
from tracer import gpu
from tracer.capture import nsys, nsys_libs
from tracer.cli import main
from tracer.errors import ToolMissingError
from tracer.analysis.hazards import NSYS_NOTE

FIXTURE = Path(__file__).resolve().parent / "data" / "nsys" / "nsys_train.sqlite"
VENDORED = ["drgn.libs/libdw-0-351e48f3.196.so", "drgn.libs/libelf-0-5826c1c9.196.so", "drgn.libs/libzstd-76b78bac.so.1.4.4"]
OTHERS = ["drgn.libs/libcurl-f8def1d0.so.4.5.0", "_drgn.cpython-312-x86_64-linux-gnu.so", "drgn/__init__.py"]
FAKE_NSYS = f"""#!{sys.executable}
import json, os, shutil, sys
cfg = json.load(open(os.environ["FAKE_NSYS"]))
if sys.argv[1:] == ["--version"]:
    print("NVIDIA Nsight Systems version 2025.3.1.0 (fake)")
    sys.exit(0)
keys = ("LD_LIBRARY_PATH", "NSYS_NVTX_PROFILER_REGISTER_ONLY")
json.dump({{"argv": sys.argv[1:], "env": {{k: os.environ.get(k) for k in keys}}}}, open(cfg["record"], "w"))
out = sys.argv[sys.argv.index("--output") + 1]
if sys.argv[1] == "export" and cfg.get("export_fails"):
    open(out, "w").write("half")
    sys.exit("export: cannot read the report")
if sys.argv[1] == "export":
    shutil.copyfile(cfg["fixture"], out)
elif cfg.get("qdstrm"):
    open(out + ".qdstrm", "wb").write(b"q" * 4096)
else:
    shutil.copyfile(cfg["fixture"], out + ".sqlite")
    open(out + ".nsys-rep", "wb").write(b"report")
"""


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def drgn_wheel(folder: Path, members: list[str]) -> Path:
    """A zip laid out as the drgn wheel is (its vendored libraries under drgn.libs/)."""
    whl = folder / "drgn-0.3.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for m in members:
            z.writestr(m, f"contents of {m}")
    return whl


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Nsight Compute's folder as on the H200: nsys in host/target-linux-x64, its importer in
    host/linux-desktop-glibc_2_11_3-x64; a fake nsys; tracer's cache in tmp_path."""
    root = tmp_path / "nsight-compute" / "2025.3.1" / "host"
    exe = executable(root / "target-linux-x64" / "nsys", FAKE_NSYS)
    importer = executable(root / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter", "#!/bin/sh\nexit 0\n")
    config = tmp_path / "fake-nsys.json"
    config.write_text(json.dumps({"record": str(tmp_path / "called.json"), "fixture": str(FIXTURE)}))
    monkeypatch.setenv("TRACER_NSYS", str(exe))
    monkeypatch.setenv("FAKE_NSYS", str(config))
    monkeypatch.setenv("TRACER_CACHE_DIR", str(tmp_path / "cache"))
    return {"nsys": exe, "importer": importer, "config": config, "called": tmp_path / "called.json"}


def lacking_elfutils(monkeypatch: pytest.MonkeyPatch) -> None:
    """The importer as on the H200: libdw.so.1 missing unless a prepared folder is on the path."""
    monkeypatch.setattr(nsys, "missing_libraries", lambda importer, libs=None: [] if libs else ["libdw.so.1"])


def test_profile_argv() -> None:
    argv = nsys.profile_argv("nsys", Path("/r/trace"), ["python", "t.py"], cuda_event_trace=True, capture_range="profile")
    assert argv == ["nsys", "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--force-overwrite=true",
                    "--export=sqlite", "--output", "/r/trace", "--cuda-event-trace=true", "--capture-range=nvtx",
                    "--nvtx-capture=profile", "--capture-range-end=stop", "python", "t.py"]


def test_importer_found_in_nsight_computes_folder(layout: dict[str, Path]) -> None:
    assert nsys.find_importer(str(layout["nsys"])) == layout["importer"]
    layout["importer"].unlink()
    with pytest.raises(ToolMissingError, match="has no QdstrmImporter beside it"):
        nsys.find_writer()


def test_prepare_from_a_wheel(tmp_path: Path) -> None:
    whl = drgn_wheel(tmp_path, VENDORED + OTHERS)
    folder = tmp_path / "cache" / "nsys-libs"
    done = nsys_libs.prepare(whl, folder)
    assert done == nsys_libs.cached(folder) and done.elfutils == "0.196" and done.source == whl.name
    assert sorted(os.listdir(folder)) == sorted([Path(m).name for m in VENDORED] + ["libdw.so.1", "libelf.so.1", "source.json"])
    assert os.readlink(folder / "libdw.so.1") == "libdw-0-351e48f3.196.so"
    assert (folder / "libelf.so.1").read_text() == "contents of drgn.libs/libelf-0-5826c1c9.196.so"
    again = nsys_libs.prepare(drgn_wheel(tmp_path, VENDORED), folder)  # replaces the folder as a whole
    assert again.folder == folder and [p.name for p in tmp_path.joinpath("cache").iterdir()] == ["nsys-libs"]


def test_prepare_refuses_sources_without_elfutils(tmp_path: Path) -> None:
    with pytest.raises(ToolMissingError, match=r"no libdw-\*\.so among the libraries found"):
        nsys_libs.prepare(drgn_wheel(tmp_path, OTHERS), tmp_path / "libs")
    with pytest.raises(ToolMissingError, match="not a wheel"):
        nsys_libs.prepare(tmp_path / "nothing.txt", tmp_path / "libs")
    assert not (tmp_path / "libs").exists()


def test_prepare_from_the_installed_drgn_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nsys_libs, "installed_drgn", lambda: ("", []))
    with pytest.raises(ToolMissingError, match=r"drgn is not installed; pip install 'tracer-nsight\[nsys\]'"):
        nsys_libs.prepare(None, tmp_path / "libs")


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("ldd")), reason="needs gcc and ldd to build a program to probe")
def test_ldd_probe_names_what_a_program_cannot_load(tmp_path: Path) -> None:
    src, libs = tmp_path / "src", tmp_path / "libs"
    src.mkdir()
    libs.mkdir()
    (src / "f.c").write_text("int tracer_fake(void) { return 3; }\n")
    (src / "main.c").write_text("int tracer_fake(void);\nint main(void) { return tracer_fake(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libtracerfake.so.1", "-o", str(src / "libtracerfake.so.1"),
                    str(src / "f.c")], check=True)
    subprocess.run(["gcc", "-o", str(tmp_path / "importer"), str(src / "main.c"), f"-L{src}", "-l:libtracerfake.so.1"], check=True)
    assert nsys.missing_libraries(tmp_path / "importer") == ["libtracerfake.so.1"]
    shutil.move(src / "libtracerfake.so.1", libs / "libtracerfake.so.1")
    assert nsys.missing_libraries(tmp_path / "importer", libs) == []


def test_writer_lacking_elfutils_is_refused_with_the_fix(layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    lacking_elfutils(monkeypatch)
    monkeypatch.setattr(nsys_libs, "installed_drgn", lambda: ("", []))
    ok, why = nsys.importer_status()
    assert not ok and "cannot load libdw.so.1" in why and "tracer doctor --fix-nsys" in why and "--backend cupti" in why


def test_writer_lacking_another_library_is_refused(layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nsys, "missing_libraries", lambda importer, libs=None: ["libQt6Core.so.6", "libdw.so.1"])
    with pytest.raises(ToolMissingError, match="cannot load libQt6Core.so.6, libdw.so.1, so .* cannot write reports; use --backend cupti"):
        nsys.find_writer(prepare=True)


def test_env_changes_only_the_nsys_child(tmp_path: Path, layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    lacking_elfutils(monkeypatch)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
    writer = nsys.find_writer(prepare=True, source=drgn_wheel(tmp_path, VENDORED))
    env = writer.env()
    assert writer.prepared_now and writer.libs is not None
    assert env["LD_LIBRARY_PATH"] == f"{writer.libs.folder}:/usr/local/nvidia/lib64"
    assert env["NSYS_NVTX_PROFILER_REGISTER_ONLY"] == "0" and "NSYS_NVTX_PROFILER_REGISTER_ONLY" not in os.environ
    assert os.environ["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert not nsys.find_writer().prepared_now  # the cache is used from now on


def test_doctor_fix_nsys(tmp_path: Path, layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    lacking_elfutils(monkeypatch)
    assert main(["doctor", "--from", str(tmp_path)]) == 2
    assert "--from needs --fix-nsys" in capsys.readouterr().err
    whl = drgn_wheel(tmp_path, VENDORED)
    main(["doctor", "--fix-nsys", "--from", str(whl)])
    out = capsys.readouterr()
    assert f"nsys: prepared libdw.so.1, libelf.so.1 in {tmp_path / 'cache' / 'nsys-libs'} (elfutils 0.196 from {whl.name})" in out.err
    assert "ok  nsys can write reports" in out.out and "on LD_LIBRARY_PATH of nsys only" in out.out


def test_doctor_fix_nsys_without_nsys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TRACER_NSYS", str(tmp_path / "no-nsys"))
    assert main(["doctor", "--fix-nsys"]) == 5
    assert "nsys not found" in capsys.readouterr().err


def test_trace_run_with_nsys(tmp_path: Path, layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    lacking_elfutils(monkeypatch)
    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    site = tmp_path / "site"
    with zipfile.ZipFile(drgn_wheel(tmp_path, VENDORED + OTHERS)) as whl:
        whl.extractall(site)
    monkeypatch.setattr(nsys_libs, "installed_drgn", lambda: ("drgn 0.3.0 (installed)", sorted(site.glob("drgn.libs/*"))))
    run = tmp_path / "run"
    assert main(["trace", "run", "--backend", "nsys", "--cuda-event-trace", "--pairs", "all", "-o", str(run),
                 "--", "python", "train.py"]) == 0
    called = json.loads(layout["called"].read_text())
    assert called["argv"] == nsys.profile_argv("nsys", run.parent / f".run.partial-{os.getpid()}" / "trace", ["python", "train.py"],
                                               cuda_event_trace=True)[1:]
    assert called["env"]["LD_LIBRARY_PATH"].split(":")[0] == str(tmp_path / "cache" / "nsys-libs")
    assert called["env"]["NSYS_NVTX_PROFILER_REGISTER_ONLY"] == "0"
    assert (f"tracer: nsys: prepared libdw.so.1, libelf.so.1 in {tmp_path / 'cache' / 'nsys-libs'} (elfutils 0.196 from "
            "drgn 0.3.0 (installed)) for its QdstrmImporter") in capsys.readouterr().err
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["hazards"] == {"memory": False, "note": NSYS_NOTE} and verdict["kernels"] > 0
    assert (run / "trace.nsys-rep").is_file() and "nsys-libs" in (run / "logs" / "nsys.txt").read_text()
    assert json.loads((run / "command.json").read_text())["backend"] == "nsys"


def test_trace_run_that_leaves_only_a_qdstrm_fails(tmp_path: Path, layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gpu, "probe", fake_tools.fake_probe)
    layout["config"].write_text(json.dumps(json.loads(layout["config"].read_text()) | {"qdstrm": True}))
    assert main(["trace", "run", "--backend", "nsys", "-o", str(tmp_path / "run"), "--", "python", "t.py"]) == 5
    err = capsys.readouterr().err
    assert "nsys wrote no report, only a 0 MB .qdstrm (removed)" in err and "use --backend cupti" in err
    assert not list(tmp_path.rglob("*.qdstrm"))


def test_import_of_a_report_exports_it_with_the_writers_env(tmp_path: Path, layout: dict[str, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    lacking_elfutils(monkeypatch)
    nsys_libs.prepare(drgn_wheel(tmp_path, VENDORED))
    rep = tmp_path / "train.nsys-rep"
    rep.write_bytes(b"report")
    assert main(["trace", "import", str(rep), "-o", str(tmp_path / "imported"), "--pairs", "all"]) == 0
    called = json.loads(layout["called"].read_text())
    assert called["argv"][:2] == ["export", "--type"] and called["env"]["LD_LIBRARY_PATH"].endswith("nsys-libs")
    assert json.loads((tmp_path / "imported" / "verdict.json").read_text())["kernels"] == 92


def test_a_failed_export_is_an_error_and_leaves_nothing(tmp_path: Path, layout: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    layout["config"].write_text(json.dumps(json.loads(layout["config"].read_text()) | {"export_fails": True}))
    rep = tmp_path / "broken.nsys-rep"
    rep.write_bytes(b"report")
    assert main(["trace", "import", str(rep), "-o", str(tmp_path / "imported")]) == 6
    assert "nsys export failed (exit 1): export: cannot read the report" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite" or ".partial" in p.name) == []
