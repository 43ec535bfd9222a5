"""Build tracer's wheel from a clean copy of the source, so nothing left in ./build (files since
deleted, an old profile) can reach it and the checkout gets no build/ or egg-info.

    python scripts/build_wheel.py OUT_DIR [--isolated]

prints the wheel's path. Without --isolated, the running Python's setuptools builds it (fast, no
download); with it, pip fetches the build requirements into an isolated environment.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What an sdist holds (MANIFEST.in): the build files, the package and the folders setup.py ships.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "tracer", "kernels", "profiles")


def copy_sources(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)


def build_wheel(out_dir: Path, isolated: bool = False) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tracer-wheel-src-") as tmp:
        src = Path(tmp)
        copy_sources(src)
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out_dir), str(src)]
        if not isolated:
            argv.insert(4, "--no-build-isolation")
        subprocess.run(argv, check=True, timeout=600)
    wheels = sorted(out_dir.glob("*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise SystemExit(f"build_wheel: pip wrote no wheel into {out_dir}")
    return wheels[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--isolated", action="store_true", help="build in pip's isolated build environment")
    args = parser.parse_args()
    print(build_wheel(args.out_dir, args.isolated))
    return 0


if __name__ == "__main__":
    sys.exit(main())
