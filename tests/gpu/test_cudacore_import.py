"""cuda.core imported by many threads at once in a fresh process: through tracer's locked import
(tracer.kernel.cudacore) every thread gets the whole package. The plain import raced there on the
H200 (`cannot import name 'Program' from 'cuda.core.cu13'`), failing the GPU tests' set-up when
their kernels compiled in a thread pool."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("cuda.core", reason="cuda.core is not installed")
pytestmark = pytest.mark.gpu

THREADS = r"""
import sys, threading
from tracer.kernel.cudacore import cuda_core
barrier, failed = threading.Barrier(16), []
def go():
    barrier.wait()
    try:
        cuda_core().Program, cuda_core().ProgramOptions
    except Exception as exc:
        failed.append(repr(exc))
threads = [threading.Thread(target=go) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
print(failed[:1])
sys.exit(1 if failed else 0)
"""


def test_sixteen_threads_importing_cuda_core_at_once_all_get_it() -> None:
    procs = [subprocess.Popen([sys.executable, "-c", THREADS], stdout=subprocess.PIPE, text=True) for _ in range(12)]
    outs = [(p.communicate(timeout=120)[0], p.returncode) for p in procs]
    assert all(code == 0 for _, code in outs), [o for o, c in outs if c]
