"""A graph replayed on one stream reads a tensor that another stream writes with no wait (RAW between
the other stream's kernel and the graph's node)."""
import torch

SPIN = 20_000_000
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
x = torch.randn(1 << 20, device="cuda")
out = torch.empty(1 << 20, device="cuda")
g = torch.cuda.CUDAGraph()
capture = torch.cuda.Stream()
torch.cuda.synchronize()  # the tensors were made on the default stream
with torch.cuda.stream(capture):
    out.copy_(x * 2)
torch.cuda.synchronize()
with torch.cuda.graph(g, stream=capture):
    out.copy_(x * 2)
torch.cuda.synchronize()
for it in range(2):
    with torch.cuda.nvtx.range(f"it{it}"):
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("write"):
            torch.cuda._sleep(SPIN)
            x.add_(1.0)
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("replay"):
            g.replay()  # no s1.wait_stream(s2): the race
    torch.cuda.synchronize()
print("ops_graph_written_stream", float(out.sum()))
