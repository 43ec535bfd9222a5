"""A fake compute-sanitizer for fault injection: put on PATH, it does what a JSON file named by
$FAKE_SANITIZER says (write this XML to the --save path, print this text, exit with this code,
hang, or die by a signal)."""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

FAKE = f"""#!{sys.executable}
import json, os, signal, sys, time
cfg = json.load(open(os.environ["FAKE_SANITIZER"]))
xml = sys.argv[sys.argv.index("--save") + 1]
if cfg.get("hang"):
    time.sleep(300)
if cfg.get("xml") is not None:
    open(xml, "w").write(cfg["xml"])
sys.stdout.write(cfg.get("text", ""))
sys.stdout.flush()
if cfg.get("signal"):
    os.kill(os.getpid(), cfg["signal"])
sys.exit(cfg.get("exit", 0))
"""
EMPTY_XML = '<?xml version="1.0" encoding="utf-8"?>\n<ComputeSanitizerOutput/>\n'
CLEAN_TEXT = "hello from the target\n========= ERROR SUMMARY: 0 errors\n"


def fake_probe():
    """tracer.gpu.probe on a machine the fake tools stand in for: one GPU (captures check for one first)."""
    from tracer.gpu import GpuProbe

    return GpuProbe(1, "a fake GPU (tests/fake_tools.py)")


def install(folder: Path) -> tuple[Path, Path]:
    """(bin folder to put first on PATH, config file to name in $FAKE_SANITIZER)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "compute-sanitizer"
    exe.write_text(FAKE)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return bin_dir, folder / "fake-sanitizer.json"


def configure(config: Path, **behaviour: object) -> None:
    config.write_text(json.dumps(behaviour))


def environ(bin_dir: Path, config: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_SANITIZER": str(config)}
