"""Build hook: the wheel carries the repo's top-level kernels/ and profiles/ as tracer/data/kernels
and tracer/data/profiles (tracer.resources finds them there, or at the top of a checkout)."""
from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("kernels", "profiles")


class BuildPyWithResources(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads them from the checkout
            return
        root = Path(__file__).resolve().parent
        for name in SHIPPED:
            source = root / name
            if not source.is_dir():
                raise SystemExit(f"setup.py: {source} is missing; build from a full checkout or sdist")
            self.copy_tree(str(source), str(Path(self.build_lib) / "tracer" / "data" / name))


setup(cmdclass={"build_py": BuildPyWithResources})
