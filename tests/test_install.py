"""The wheel a user installs carries the kernel sources, profiles, suppressions and demo data, has
`tracer` as its only top level, and tracer finds its files in it (not in a checkout).
scripts/ci_wheel.sh installs it into a fresh venv and runs commands; this builds it and reads it."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tracer import resources

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from build_wheel import build_wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    setuptools = pytest.importorskip("setuptools", reason="building the wheel needs setuptools (test extra)")
    if int(setuptools.__version__.split(".")[0]) < 68:
        pytest.skip(f"setuptools {setuptools.__version__} is older than pyproject's >=68 (pip install -e '.[test]')")
    return build_wheel(tmp_path_factory.mktemp("dist"))


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def _shipped(folder: str) -> set[str]:
    """Every file of a top-level folder, as the wheel names it under tracer/data/."""
    base = ROOT / folder
    return {f"tracer/data/{folder}/{p.relative_to(base).as_posix()}" for p in base.rglob("*") if p.is_file()}


def test_the_distribution_is_not_called_tracer(wheel: Path) -> None:
    assert wheel.name.startswith("tracer_nsight-"), wheel.name


def test_wheel_ships_kernels_profiles_suppressions_and_demo_data(wheel: Path) -> None:
    names = set(_names(wheel))
    assert "tracer/data/kernels/cast_transpose.cu" in names
    assert "tracer/data/profiles/suppressions/default.yaml" in names
    assert "tracer/data/profiles/campaigns/cpu_smoke.yaml" in names
    assert "tracer/data/profiles/torch_composite.yaml" in names
    assert _shipped("kernels") | _shipped("profiles") <= names
    demo = {f"tracer/{p.relative_to(ROOT / 'tracer').as_posix()}" for p in resources.DEMO_DIR.rglob("*") if p.is_file()}
    assert "tracer/data/demo/linear_backward_planted.sqlite" in demo and demo <= names
    assert "tracer/resources.py" in names and "tracer/cli.py" in names
    assert "tracer/capture/boot/sitecustomize.py" in names  # trace run's bootstrap (a folder, not a package)
    from tracer.schemas import FILES

    assert {f"tracer/data/schemas/{f}.schema.json" for f in FILES.values()} <= names  # the JSON contracts
    assert any(n.endswith("LICENSE") for n in names)
    static = ROOT / "tracer" / "serve" / "static"
    assert {f"tracer/serve/static/{p.name}" for p in static.iterdir()} <= names  # tracer serve works offline: no CDN


def test_wheel_has_only_the_tracer_top_level(wheel: Path) -> None:
    names = _names(wheel)
    info = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    with zipfile.ZipFile(wheel) as z:
        assert z.read(info).decode().split() == ["tracer"]
    outside = [n for n in names if not n.startswith("tracer/") and ".dist-info/" not in n]
    assert outside == []
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_unpacked_wheel_finds_its_own_files(wheel: Path, tmp_path: Path) -> None:
    """Imported from the unpacked wheel (as from site-packages), every lookup lands inside it."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    probe = (
        "import json, tracer, tracer.resources as r, tracer.workloads.profiles as p, tracer.kernel.compile as c, "
        "tracer.sanitize.suppress as s, tracer.campaign.grid as cp, tracer.app.demo as rep;"
        "print(json.dumps({'package': tracer.__file__, 'checkout': r.is_checkout(), 'source': len(c.kernel_source()),"
        " 'dirs': [str(x) for x in (c.KERNEL_DIR, p.PROFILE_DIR, cp.CAMPAIGN_DIR, s.DEFAULT_FILE, rep.DEMO_DIR)],"
        " 'workloads': p.builtin_names(), 'campaigns': p.builtin_names(cp.CAMPAIGN_DIR)}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": ""},
                         capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout)
    assert got["package"] == str(site / "tracer" / "__init__.py")
    assert got["checkout"] is False and got["source"] > 1000
    assert all(d.startswith(str(site / "tracer" / "data")) for d in got["dirs"]), got["dirs"]
    assert "torch_composite" in got["workloads"] and "cpu_smoke" in got["campaigns"]


def test_a_checkout_reads_its_top_level_folders() -> None:
    assert resources.is_checkout()
    assert resources.KERNEL_DIR == ROOT / "kernels" and resources.PROFILE_DIR == ROOT / "profiles"
    assert resources.SUPPRESSIONS_FILE.is_file() and (resources.DEMO_DIR / "campaign.json").is_file()
