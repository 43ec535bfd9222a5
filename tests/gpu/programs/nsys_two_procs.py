"""Two processes on one GPU (multiprocessing, spawn), each with its own non-default stream, a
matmul loop inside an NVTX range named after its rank: one nsys capture holds both."""
import multiprocessing as mp
import sys


def work(rank: int) -> None:
    import torch

    s = torch.cuda.Stream()
    a = torch.randn(256, 256, device="cuda")
    with torch.cuda.stream(s), torch.cuda.nvtx.range(f"proc{rank}"):
        for _ in range(4):
            a = torch.tanh(a @ a)
    torch.cuda.synchronize()
    print(f"proc{rank}", float(a.sum()), flush=True)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=work, args=(r,)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(max(p.exitcode or 0 for p in procs))
