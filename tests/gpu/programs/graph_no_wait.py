"""A CUDA graph replayed on one stream writes a tensor that another stream reads with no wait
(RAW): the graph's kernels have no launch of their own."""
import torch

SPIN = 20_000_000
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
x = torch.randn(1 << 22, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    out = (x * 3).relu_()  # warm-up before capture, as torch's docs ask
torch.cuda.current_stream().wait_stream(side)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    out = (x * 3).relu_()
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("produce"):
            torch.cuda._sleep(SPIN)
            g.replay()
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("consume"):
            c = out * 2  # no s2.wait_stream(s1): the race
    torch.cuda.synchronize()
print("graph_no_wait", float(c.sum()))
