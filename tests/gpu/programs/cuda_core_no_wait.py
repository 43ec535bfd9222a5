"""A cuda.core (NVRTC) kernel on another stream reads a torch tensor with no wait (RAW; the
kernel's use of its pointers is unknown to tracer, so the verdict says "may")."""
import numpy as np
import torch
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

SRC = r"""
extern "C" __global__ void scale2(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""


class TorchStream:
    def __init__(self, s):
        self.s = s

    def __cuda_stream__(self):
        return (0, self.s.cuda_stream)


SPIN = 20_000_000
N = 1 << 22
dev = Device(torch.cuda.current_device())
dev.set_current()
major, minor = torch.cuda.get_device_capability()
kernel = Program(SRC, "c++", ProgramOptions(arch=f"sm_{major}{minor}")).compile("cubin").get_kernel("scale2")
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
core_s2 = dev.create_stream(TorchStream(s2))
a = torch.randn(N, device="cuda")
y = torch.empty_like(a)
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("produce"):
            torch.cuda._sleep(SPIN)
            b = a * 3
        with torch.cuda.nvtx.range("consume"):
            launch(core_s2, LaunchConfig(grid=(N + 255) // 256, block=256), kernel, b.data_ptr(), y.data_ptr(), np.int32(N))
    torch.cuda.synchronize()
print("cuda_core_no_wait", float(y.sum()))
