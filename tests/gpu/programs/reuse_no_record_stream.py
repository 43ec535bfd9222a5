"""Memory freed while another stream still reads it, and handed out again on the stream it was
allocated on, without record_stream: the new tensor is written while the old one is being read."""
import torch

SPIN = 20_000_000
N = 1 << 22
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("make"):
            t = torch.ones(N, device="cuda")
        s2.wait_stream(s1)
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("read"):
            torch.cuda._sleep(SPIN)
            u = t * 2
        old = t.data_ptr()
        del t  # no t.record_stream(s2): the block is free for s1 at once
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("reuse"):
            v = torch.empty(N, device="cuda")
            v.fill_(3.0)
    torch.cuda.synchronize()
    print("reuse_no_record_stream step", step, "same block:", v.data_ptr() == old)
print("reuse_no_record_stream", float(u.sum()))
