"""cuda.core, imported under a lock. While its package initialises it swaps in a subpackage for
the installed CUDA (cuda.core.cu13); a second thread importing it in that window gets the half-made
module (`ImportError: cannot import name 'Program' from 'cuda.core.cu13'`, seen on the H200 when
the GPU tests compiled kernels in a thread pool). Every import of cuda.core in tracer goes here."""
from __future__ import annotations

import threading
from types import ModuleType

_LOCK = threading.Lock()


def cuda_core() -> ModuleType:
    with _LOCK:
        import cuda.core
    return cuda.core
