"""A CUDA graph captured across two streams (fork; buf.fill_() on the capture stream and buf.sum()
on a side stream with no edge between them; join), replayed 3 times on one stream. The race is
inside each replay (RAW between the branches); replays launched on one stream run one after the
other, so there is none between them."""
import torch

side = torch.cuda.Stream()
buf = torch.zeros(1 << 20, device="cuda")
total = torch.zeros((), device="cuda")
g = torch.cuda.CUDAGraph()
capture = torch.cuda.Stream()
torch.cuda.synchronize()  # the tensors were made on the default stream
with torch.cuda.stream(capture):
    buf.fill_(1.0)  # warm-up before capture
    total.copy_(buf.sum())
torch.cuda.synchronize()
with torch.cuda.graph(g, stream=capture):
    side.wait_stream(capture)  # fork
    buf.fill_(2.0)
    with torch.cuda.stream(side):
        torch.sum(buf, 0, out=total)  # no edge from the fill: the race
    capture.wait_stream(side)  # join
torch.cuda.synchronize()
for it in range(3):
    with torch.cuda.nvtx.range(f"replay{it}"):
        g.replay()
torch.cuda.synchronize()
print("ops_graph_branches", float(total))
