"""A DataLoader with 2 fork workers (CPU only: they leave with os._exit) feeding CUDA work in the
main process."""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset


class Numbers(Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((64,), float(i))


if __name__ == "__main__":
    total = torch.zeros(64, device="cuda")
    for batch in DataLoader(Numbers(), batch_size=4, num_workers=2):
        total += batch.cuda().sum(0)
    torch.cuda.synchronize()
    print("dataloader: sum", float(total[0]), flush=True)
