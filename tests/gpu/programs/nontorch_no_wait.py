"""No torch at all: a cuda.core (NVRTC) program with its own buffers and NVTX ranges (the nvtx
package). A kernel on stream 2 reads what a kernel on stream 1 is still writing, with no wait
(RAW). tracer learns the pointers only from the launch arguments and the buffers only from
CUPTI's allocation records, so the verdict says "may" (the direction of a pointer is a guess)."""
import sys

import numpy as np
import nvtx
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

SRC = r"""
extern "C" __global__ void slow_fill(float* y, int n, long long cycles) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 1.0f + i;
}
extern "C" __global__ void scale2(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""
N = 1 << 22
CYCLES = 20_000_000  # about 10 ms: the reader starts while the writer still runs

dev = Device(0)
dev.set_current()
module = Program(SRC, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
fill, scale = module.get_kernel("slow_fill"), module.get_kernel("scale2")
s1, s2 = dev.create_stream(), dev.create_stream()
x, y = dev.allocate(N * 4, stream=s1), dev.allocate(N * 4, stream=s1)
dev.sync()
config = LaunchConfig(grid=(N + 255) // 256, block=256)
for step in range(2):
    with nvtx.annotate(f"step{step}"):
        with nvtx.annotate("produce"):
            launch(s1, config, fill, x, np.int32(N), np.int64(CYCLES))
        with nvtx.annotate("consume"):
            launch(s2, config, scale, x, y, np.int32(N))
    dev.sync()
assert "torch" not in sys.modules, "the program (or tracer's capture) imported torch"
print("nontorch_no_wait ok")
