"""The memory capture window opened by NVTX ranges from every API (`trace run --memory-range 'win*'`):
the `nvtx` package's Domain methods (push/pop and start/end), and C (nvtxRangePushA,
nvtxRangeStartA, nvtxDomainRangePushEx with an ASCII and with a registered message, compiled here
from nvtx_c_ranges.c against CUDA's nvtx3 headers, called through ctypes). Each range holds the same
planted race (a side stream writes `buf` after a spin, the main stream reads it with no wait: RAW),
6 in all; one more in a range `other` is outside the window (counted as not judged)."""
import ctypes
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nvtx
import torch

HERE = Path(__file__).resolve().parent


def headers() -> str:
    nvcc = shutil.which("nvcc")
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", str(Path(nvcc).resolve().parent.parent) if nvcc else ""]
    roots += glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*"))
    for root in filter(None, roots):
        if (Path(root) / "include" / "nvtx3" / "nvToolsExt.h").is_file():
            return str(Path(root) / "include")
    sys.exit("nvtx_apis_window: no nvtx3/nvToolsExt.h found (CUDA_HOME, nvcc's folder, torch's nvidia packages)")


lib_path = Path(tempfile.mkdtemp()) / "libnvtx_c_ranges.so"
subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{headers()}", str(HERE / "nvtx_c_ranges.c"), "-o", str(lib_path), "-ldl"],
               check=True)
c = ctypes.CDLL(str(lib_path))
c.c_start.restype = ctypes.c_ulonglong
c.c_end.argtypes = [ctypes.c_ulonglong]

SPIN = 20_000_000
side = torch.cuda.Stream()
buf = torch.zeros(1 << 20, device="cuda")
torch.cuda.synchronize()


def race() -> torch.Tensor:
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN)
        buf.add_(1.0)
    out = buf * 2  # no wait on side: RAW
    torch.cuda.synchronize()
    return out


domain = nvtx.get_domain("train")
domain.push_range(message="win_domain_push")
race()
domain.pop_range()
rid = domain.start_range(message="win_domain_start")
race()
domain.end_range(rid)
c.c_push(b"win_c_push")
race()
c.c_pop()
cid = c.c_start(b"win_c_start")
race()
c.c_end(cid)
c.c_domain_push(b"win_c_domain", 0)
race()
c.c_domain_pop()
c.c_domain_push(b"win_c_registered", 1)
race()
c.c_domain_pop()
with torch.cuda.nvtx.range("other"):
    race()
print("nvtx_apis_window", float(buf.sum()))
