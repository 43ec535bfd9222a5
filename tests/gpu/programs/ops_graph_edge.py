"""The same two-stream graph with an edge: the side branch waits for the fill. No hazard."""
import torch

side = torch.cuda.Stream()
buf = torch.zeros(1 << 20, device="cuda")
total = torch.zeros((), device="cuda")
g = torch.cuda.CUDAGraph()
capture = torch.cuda.Stream()
torch.cuda.synchronize()  # the tensors were made on the default stream
with torch.cuda.stream(capture):
    buf.fill_(1.0)
    total.copy_(buf.sum())
torch.cuda.synchronize()
with torch.cuda.graph(g, stream=capture):
    buf.fill_(2.0)
    side.wait_stream(capture)  # the edge: fill -> sum
    with torch.cuda.stream(side):
        torch.sum(buf, 0, out=total)
    capture.wait_stream(side)
torch.cuda.synchronize()
for it in range(3):
    with torch.cuda.nvtx.range(f"replay{it}"):
        g.replay()
torch.cuda.synchronize()
print("ops_graph_edge", float(total))
