"""A GPT-2-sized model trained 3 steps, with NVTX ranges around forward, backward and optimizer
(the attribution goal of issue #15: backward kernels run on autograd's thread, outside any range
of their own). Built from a config, nothing downloaded: transformers' GPT2LMHeadModel when
transformers is installed, else the same architecture written out here."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class MiniGPT2(nn.Module):
    def __init__(self, vocab: int, positions: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def build(vocab: int, positions: int, d: int, layers: int, heads: int) -> tuple[nn.Module, str]:
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return MiniGPT2(vocab, positions, d, layers, heads), "built-in GPT-2"
    cfg = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=d, n_layer=layers, n_head=heads)
    return GPT2LMHeadModel(cfg), "transformers GPT2LMHeadModel"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    args = ap.parse_args()
    torch.manual_seed(0)
    model, kind = build(50257, 1024, 768, args.layers, 12)
    model = model.cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (args.batch, args.seq + 1), device="cuda")
    for step in range(args.steps):
        with torch.cuda.nvtx.range(f"step{step}"):
            with torch.cuda.nvtx.range("forward"):
                out = model(ids[:, :-1])
                logits = out.logits if hasattr(out, "logits") else out
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
            with torch.cuda.nvtx.range("backward"):
                loss.backward()
            with torch.cuda.nvtx.range("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    print("gpt2_train", kind, f"{sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters")


if __name__ == "__main__":
    main()
