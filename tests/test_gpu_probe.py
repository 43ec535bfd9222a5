"""The GPU tests' capability probe (runs on the CPU): a GPU whose architecture tracer's kernels are
not built for skips the GPU tests with a reason instead of failing them with "unknown arch"."""
from __future__ import annotations

import pytest


def _probe():
    from tracer.kernel.spec import unsupported_arch_reason

    return unsupported_arch_reason


@pytest.mark.parametrize("capability", [(9, 0), (10, 0), (12, 0)])
def test_supported_archs_run(capability: tuple[int, int]) -> None:
    assert _probe()(capability) is None


@pytest.mark.parametrize("capability,arch", [((8, 0), "sm_80"), ((7, 5), "sm_75"), ((11, 0), "sm_110")])
def test_other_archs_skip_with_a_reason(capability: tuple[int, int], arch: str) -> None:
    reason = _probe()(capability)
    assert reason is not None and arch in reason and "sm_90" in reason
