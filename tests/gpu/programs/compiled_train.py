"""A torch.compile'd MLP trained 3 steps, batches copied in on a side stream the way data loaders
do (wait_stream + record_stream): no hazard; backward kernels come from autograd's thread."""
import torch

torch.manual_seed(0)
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
copy = torch.cuda.Stream()
host = [torch.randn(256, 512).pin_memory() for _ in range(4)]


def load(i: int) -> torch.Tensor:
    with torch.cuda.stream(copy):
        batch = host[i % len(host)].to("cuda", non_blocking=True)
    torch.cuda.current_stream().wait_stream(copy)
    batch.record_stream(torch.cuda.current_stream())
    return batch


for step in range(4):  # step 0 compiles
    with torch.cuda.nvtx.range(f"step{step}"):
        x = load(step)
        with torch.cuda.nvtx.range("forward"):
            loss = model(x).square().mean()
        with torch.cuda.nvtx.range("backward"):
            loss.backward()
        with torch.cuda.nvtx.range("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("compiled_train", float(loss))
