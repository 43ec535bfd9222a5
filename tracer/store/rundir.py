"""Run directories: everything about one capture, written under a temporary name and renamed
into place only when complete."""
from __future__ import annotations

import os
import platform
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracer.store import atomic
from tracer.store.atomic import output_error

ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "NVTX_INJECTION64_PATH", "PYTHONPATH", "TRACER_CACHE_DIR", "LD_LIBRARY_PATH")


def default_run_dir(name: str, root: Path = Path("runs")) -> Path:
    return root / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


@contextmanager
def staged(final: Path) -> Iterator[Path]:
    """Yield a temp folder beside `final`; rename it to `final` on success. On failure a folder
    with files in it (logs, command.json) is kept as `final.failed` and named in the error; an
    empty one, or one whose writing failed (disk full), is removed."""
    from tracer.errors import UsageError

    if final.exists():
        raise UsageError(f"run directory {final} already exists; pass another -o")
    tmp = final.with_name(f".{final.name}.partial-{os.getpid()}")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as exc:
        raise output_error(final, exc) from exc
    try:
        yield tmp
    except BaseException as exc:
        _keep_failed(tmp, final, exc)
        raise
    try:
        tmp.rename(final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise output_error(final, exc) from exc


def failed_name(final: Path) -> Path:
    """`final.failed`, or `final.failed-2`, ... when an earlier failure is kept there."""
    n, cand = 1, final.with_name(f"{final.name}.failed")
    while cand.exists():
        n += 1
        cand = final.with_name(f"{final.name}.failed-{n}")
    return cand


def _keep_failed(tmp: Path, final: Path, exc: BaseException) -> None:
    from tracer.errors import OutputError, TracerError

    if isinstance(exc, OutputError) or not any(tmp.rglob("*")):
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OutputError) and exc.args:  # name the run directory, not its temporary name
            exc.args = (str(exc.args[0]).replace(str(tmp), str(final)), *exc.args[1:])
        return
    kept = failed_name(final)
    try:
        tmp.rename(kept)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return
    logs = kept / "logs" if (kept / "logs").is_dir() else kept
    note = f"the failed run's files are kept in {kept} (logs: {logs})"
    if isinstance(exc, TracerError) and exc.args:
        exc.args = (f"{exc.args[0]}; {note}", *exc.args[1:])
    else:
        print(f"tracer: {note}", file=sys.stderr)


def write_json(path: Path, data: Any) -> None:
    atomic.write_json(path, data)


def environment(gpu: bool = True) -> dict[str, Any]:
    """Versions and (`gpu`: through torch, which it imports) the GPU, as far as they can be read
    without failing."""
    from importlib.metadata import PackageNotFoundError, version

    from tracer import __version__

    info: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(), "host": platform.node(),
                            "tracer": __version__}  # the distribution is tracer-nsight; a checkout may not be installed
    for pkg in ("torch", "cuda-python", "cuda-core", "cupti-python", "nvtx"):
        try:
            info[pkg] = version(pkg)
        except PackageNotFoundError:
            info[pkg] = None
    try:
        if gpu:
            import torch

            if torch.cuda.is_available():
                p = torch.cuda.get_device_properties(0)
                info["gpu"] = {"name": p.name, "sm": f"{p.major}{p.minor}", "sms": p.multi_processor_count,
                               "memory_gb": round(p.total_memory / 2**30, 1), "cuda": torch.version.cuda}
    except Exception as exc:  # recorded, not raised: a broken CUDA setup is part of the environment
        info["gpu_error"] = str(exc)
    info["env"] = {k: os.environ[k] for k in ENV_KEYS if k in os.environ}
    return info
