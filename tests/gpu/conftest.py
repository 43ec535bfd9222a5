from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest


def arch_skip_reason(capability: tuple[int, int]) -> str | None:
    """Why the GPU tests cannot run on a GPU of this compute capability (None: they can)."""
    from tracer.kernel.spec import SUPPORTED_ARCHS

    arch = f"sm_{capability[0]}{capability[1]}"
    if arch in SUPPORTED_ARCHS:
        return None
    return f"the GPU is {arch}; tracer's kernels are built for {', '.join(SUPPORTED_ARCHS)} only"


def _visible_gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None  # the root conftest skips GPU tests with its own reason
    return arch_skip_reason(torch.cuda.get_device_capability())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _visible_gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def precompile_kernels() -> None:
    """Compile the kernels the GPU tests use in parallel once (NVRTC releases the GIL)."""
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available() or _visible_gpu_reason() is not None:
        return
    from tracer.kernel import compile as nvrtc_compile
    from tracer.kernel.spec import Config, InDtype, KernelKey, OutFormat, Variant, all_configs, pick_config
    from tracer.kernel.launch import device_arch, num_sms

    arch, sms = device_arch(), num_sms()
    shapes = [(2048, 12288), (768, 1024), (256, 65536), (65536, 128), (256, 256), (120, 2080), (1481, 677), (1, 3221),
              (2333, 1), (4096, 4096), (1024, 1024), (2304, 1920)]
    keys = {KernelKey(v, pick_config(d, r, c, sms), d, f, arch) for v in Variant for d in InDtype for f in OutFormat for r, c in shapes}
    keys |= {KernelKey(Variant.NONE, c, InDtype.BF16, OutFormat.E4M3, arch) for c in all_configs(InDtype.BF16)}
    keys |= {KernelKey(Variant.DEVICE_BEFORE_ATOMIC, Config(16, 8), InDtype.BF16, OutFormat.E4M3, arch)}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        list(pool.map(nvrtc_compile.cubin, keys))
