"""A foreign torch program for the nsys backend: a small training loop fed by a second stream
through CUDA events, NVTX ranges per step and phase; steps 1-3 sit inside the NVTX range
"profile", for nsys's --capture-range (step 0, outside it, warms up)."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
prep, main = torch.cuda.Stream(), torch.cuda.current_stream()
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step(i: int) -> torch.Tensor:
    with torch.cuda.nvtx.range(f"step{i}"):
        with torch.cuda.stream(prep), torch.cuda.nvtx.range("prepare"):
            x = torch.randn(64, 512, device="cuda") * 0.5
            y = torch.randint(0, 10, (64,), device="cuda")
            ready = torch.cuda.Event()
            ready.record(prep)
        main.wait_event(ready)
        x.record_stream(main)
        y.record_stream(main)
        with torch.cuda.nvtx.range("forward"):
            loss = F.cross_entropy(model(x), y)
        with torch.cuda.nvtx.range("backward"):
            opt.zero_grad()
            loss.backward()
        with torch.cuda.nvtx.range("optimizer"):
            opt.step()
    return loss


step(0)
torch.cuda.synchronize()
with torch.cuda.nvtx.range("profile"):
    for i in range(1, 4):
        loss = step(i)
    torch.cuda.synchronize()
print("nsys_train loss", float(loss))
