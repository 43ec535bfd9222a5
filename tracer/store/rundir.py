"""Run directories: everything about one capture, written under a temporary name and renamed
into place only when complete."""
from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "NVTX_INJECTION64_PATH", "PYTHONPATH", "TRACER_CACHE_DIR", "LD_LIBRARY_PATH")


def default_run_dir(name: str, root: Path = Path("runs")) -> Path:
    return root / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


@contextmanager
def staged(final: Path) -> Iterator[Path]:
    """Yield a temp folder beside `final`; rename it to `final` on success, remove it on failure."""
    if final.exists():
        from tracer.errors import UsageError

        raise UsageError(f"run directory {final} already exists; pass another -o")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tmp.rename(final)


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)


def environment(gpu: bool = True) -> dict[str, Any]:
    """Versions and (`gpu`: through torch, which it imports) the GPU, as far as they can be read
    without failing."""
    info: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(), "host": platform.node()}
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("tracer", "torch", "cuda-python", "cuda-core", "cupti-python", "nvtx"):
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
