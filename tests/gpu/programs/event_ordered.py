"""A consumer on another stream that waits for the producer's event: ordered, no hazard."""
import torch

SPIN = 20_000_000  # cycles the producer stream spins first, so an unordered consumer would run early
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
a = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("produce"):
            torch.cuda._sleep(SPIN)
            b = a @ a
            done = torch.cuda.Event()
            done.record(s1)
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("consume"):
            s2.wait_event(done)
            c = b * 2
    torch.cuda.synchronize()
print("event_ordered", float(c.sum()))
