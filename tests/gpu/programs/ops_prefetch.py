"""The prefetch pattern done right: the next batch is copied from pinned memory with non_blocking on a
side stream while the current one is used; the main stream waits for the copy and record_stream keeps
the allocator from reusing the batch early. No hazard."""
import torch

side = torch.cuda.Stream()
batches = [torch.randn(256, 1024).pin_memory() for _ in range(4)]
w = torch.randn(1024, 1024, device="cuda")


def prefetch(i: int) -> torch.Tensor:
    with torch.cuda.stream(side), torch.cuda.nvtx.range(f"prefetch{i}"):
        return batches[i].to("cuda", non_blocking=True)


nxt = prefetch(0)
for i in range(len(batches)):
    torch.cuda.current_stream().wait_stream(side)
    cur = nxt
    cur.record_stream(torch.cuda.current_stream())
    if i + 1 < len(batches):
        nxt = prefetch(i + 1)
    with torch.cuda.nvtx.range(f"step{i}"):
        y = (cur @ w).relu_()
torch.cuda.synchronize()
print("ops_prefetch", float(y.sum()))
