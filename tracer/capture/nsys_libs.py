"""The elfutils libraries an Nsight Systems importer may lack, in a folder tracer owns.

The nsys inside Nsight Compute's folder writes reports only when its QdstrmImporter loads, and
that needs `libdw.so.1` and `libelf.so.1` (elfutils), which many machines lack. The `drgn` wheel
vendors elfutils (`drgn.libs/libdw-0-<hash>.<version>.so`): `prepare` copies those two and the
compression libraries they link against from an installed drgn, a drgn wheel or a folder into
`<cache>/nsys-libs`, with `libdw.so.1` and `libelf.so.1` linked to them. The folder is put on
LD_LIBRARY_PATH for the nsys child only (tracer.capture.nsys); nothing else is changed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tracer.errors import ToolMissingError

SONAMES = {"libdw.so.1": "libdw-", "libelf.so.1": "libelf-"}  # what the importer asks for: the vendored file's prefix
VENDORED = re.compile(r"^lib(dw|elf|zstd|lzma|bz2)-[0-9a-f][^/]*\.so[.0-9]*$")  # auditwheel's names: libdw-0-351e48f3.196.so
ELFUTILS_VERSION = re.compile(r"^libdw-\d+-[0-9a-f]+\.(\d+)\.so$")
SOURCE_FILE = "source.json"
HOW = ("pip install 'tracer-nsight[nsys]' (drgn, which vendors elfutils) then `tracer doctor --fix-nsys`, "
       "or `tracer doctor --fix-nsys --from drgn-*.whl`; or trace with `--backend cupti`")


@dataclass(frozen=True)
class Prepared:
    folder: Path
    source: str  # where the libraries came from
    elfutils: str  # the elfutils version in the file names, "?" when they do not say

    def describe(self) -> str:
        return f"{', '.join(SONAMES)} in {self.folder} (elfutils {self.elfutils} from {self.source})"


def cache_folder() -> Path:
    root = os.environ.get("TRACER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tracer")
    return Path(root) / "nsys-libs"


def cached(folder: Path | None = None) -> Prepared | None:
    """The prepared folder when both links resolve to files, else None."""
    folder = folder or cache_folder()
    if not all((folder / name).is_file() for name in SONAMES):
        return None
    try:
        info = json.loads((folder / SOURCE_FILE).read_text())
        return Prepared(folder, str(info["source"]), str(info["elfutils"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Prepared(folder, "?", "?")


def installed_drgn() -> tuple[str, list[Path]]:
    """(description, the vendored library files) of the drgn installed beside tracer; ([]) when none."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution("drgn")
    except importlib.metadata.PackageNotFoundError:
        return "", []
    files = [Path(str(dist.locate_file(f))) for f in dist.files or () if _vendored(Path(str(f)))]
    return f"drgn {dist.version} (installed)", files


def _vendored(path: Path) -> bool:
    return path.parent.name.endswith(".libs") and bool(VENDORED.match(path.name))


def prepare(source: Path | None = None, folder: Path | None = None) -> Prepared:
    """Copy the elfutils libraries from `source` (a drgn wheel, or a folder holding drgn.libs or
    the libraries), or from the installed drgn, into `folder` (written under a temporary name,
    then renamed over the old one)."""
    folder = folder or cache_folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".nsys-libs-", dir=folder.parent) as tmp:
        staging = Path(tmp) / "libs"
        staging.mkdir()
        what = _copy_from(source, staging)
        names = _link(staging)
        elfutils = _elfutils_version(names["libdw.so.1"])
        (staging / SOURCE_FILE).write_text(json.dumps({"source": what, "elfutils": elfutils}))
        old = Path(tmp) / "old"
        if folder.exists():
            folder.rename(old)
        staging.rename(folder)
    return Prepared(folder, what, elfutils)


def _copy_from(source: Path | None, into: Path) -> str:
    if source is None:
        what, files = installed_drgn()
        if not files:
            raise ToolMissingError(f"no elfutils libraries to prepare nsys with: drgn is not installed; {HOW}")
        for f in files:
            shutil.copy2(f, into / f.name)
        return what
    if source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as whl:
            members = [m for m in whl.namelist() if _vendored(Path(m))]
            for m in members:
                (into / Path(m).name).write_bytes(whl.read(m))
        return source.name
    if source.is_dir():
        for f in [*source.glob("*.libs/*"), *source.glob("*")]:
            if f.is_file() and VENDORED.match(f.name):
                shutil.copy2(f, into / f.name)
        return str(source)
    raise ToolMissingError(f"--from {source}: not a wheel (.whl) or a folder; give a drgn wheel or its unpacked folder")


def _link(folder: Path) -> dict[str, str]:
    """libdw.so.1 / libelf.so.1 -> the vendored files; a source without them is an error."""
    out = {}
    for soname, prefix in SONAMES.items():
        hits = sorted(f.name for f in folder.iterdir() if f.name.startswith(prefix) and VENDORED.match(f.name))
        if not hits:
            raise ToolMissingError(f"no {prefix}*.so among the libraries found ({', '.join(sorted(os.listdir(folder))) or 'none'}); "
                                   f"{HOW}")
        (folder / soname).symlink_to(hits[-1])
        out[soname] = hits[-1]
    return out


def _elfutils_version(name: str) -> str:
    m = ELFUTILS_VERSION.match(name)
    return f"0.{m.group(1)}" if m else "?"
