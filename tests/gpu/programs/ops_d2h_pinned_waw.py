"""Results copied back into one pinned host buffer, each iteration on the next of two side streams,
with no wait between them: the second copy may overwrite the host range while the first still
writes it (WAW on host memory)."""
import torch

SPIN = 20_000_000
streams = [torch.cuda.Stream(), torch.cuda.Stream()]
host = torch.empty(1 << 20).pin_memory()
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
for it in range(2):
    s = streams[it % 2]
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.cuda.nvtx.range(f"d2h{it}"):
        torch.cuda._sleep(SPIN // (it + 1))
        host.copy_(x, non_blocking=True)  # no wait for the other stream's copy: the race
torch.cuda.synchronize()
print("ops_d2h_pinned_waw", float(host.sum()))
