"""Where the files tracer ships besides its code are: the kernel sources, the profiles (workloads,
campaigns, suppressions) and the demo data.

kernels/ and profiles/ sit at the top of a checkout; the wheel carries them as tracer/data/kernels
and tracer/data/profiles (setup.py copies them at build time). A checkout (editable install, or
PYTHONPATH) reads the top-level folders, so an edit to a profile is seen at once; an installed
wheel reads its own copy. Every lookup goes through this module.
"""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def package_dir() -> Path:
    """The installed `tracer` package folder (tracer is never imported from a zip)."""
    root = files("tracer")
    if not isinstance(root, Path):
        raise RuntimeError(f"tracer is imported from {root}, not from a folder: install it with pip")
    return root


def import_root() -> Path:
    """The folder holding the `tracer` package: what a child process needs on PYTHONPATH."""
    return package_dir().parent


def is_checkout() -> bool:
    return (import_root() / "pyproject.toml").is_file() and (import_root() / "kernels").is_dir()


def shipped_dir(name: str) -> Path:
    """kernels or profiles: the checkout's top-level folder, else the wheel's tracer/data copy."""
    return import_root() / name if is_checkout() else package_dir() / "data" / name


KERNEL_DIR = shipped_dir("kernels")
PROFILE_DIR = shipped_dir("profiles")
SUPPRESSIONS_FILE = PROFILE_DIR / "suppressions" / "default.yaml"
DEMO_DIR = package_dir() / "data" / "demo"
