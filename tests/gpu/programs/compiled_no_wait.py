"""A torch.compile'd function (Inductor's Triton kernel) on another stream reads a tensor with no
wait (RAW, "may": compiled kernels are matched by their launch arguments)."""
import torch

SPIN = 20_000_000
N = 1 << 22


@torch.compile
def gelu_scale(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 2 + 1


s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
a = torch.randn(N, device="cuda")
s2.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s2):
    y = gelu_scale(a)  # compiled before the timed part
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("produce"):
            torch.cuda._sleep(SPIN)
            b = a * 3
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("consume"):
            y = gelu_scale(b)  # no s2.wait_stream(s1): the race
    torch.cuda.synchronize()
print("compiled_no_wait", float(y.sum()))
