from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest


@pytest.fixture(scope="session", autouse=True)
def precompile_kernels() -> None:
    """Compile the kernels the GPU tests use in parallel once (NVRTC releases the GIL); not when
    TRACER_GPU_PRECOMPILE=0 (a run of tests that compile none: scripts/device_crash.sh)."""
    if os.environ.get("TRACER_GPU_PRECOMPILE") == "0":
        return
    try:
        import torch
    except ImportError:
        return
    from tracer.kernel.spec import unsupported_arch_reason

    if not torch.cuda.is_available() or unsupported_arch_reason(torch.cuda.get_device_capability()) is not None:
        return
    from tracer.kernel import compile as nvrtc_compile
    from tracer.kernel.spec import Config, InDtype, KernelKey, OutFormat, Variant, all_configs, pick_config
    from tracer.kernel.launch import device_arch, num_sms

    arch, sms = device_arch(), num_sms()
    shapes = [(2048, 12288), (768, 1024), (256, 65536), (65536, 128), (256, 256), (120, 2080), (1481, 677), (1, 3221),
              (2333, 1), (4096, 4096), (1024, 1024), (2304, 1920)]
    keys = {KernelKey(variant=v, config=pick_config(d, r, c, sms), in_dtype=d, out_format=f,
                      arch=arch) for v in Variant for d in InDtype for f in OutFormat for r, c in shapes}
    keys |= {KernelKey(variant=Variant.NONE, config=c, in_dtype=InDtype.BF16, out_format=OutFormat.E4M3,
                       arch=arch) for c in all_configs(InDtype.BF16)}
    keys |= {KernelKey(variant=Variant.DEVICE_BEFORE_ATOMIC, config=Config(16, 8), in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch=arch)}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        list(pool.map(nvrtc_compile.cubin, keys))
