"""The per-op CPU cost of `--memory`'s TorchDispatchMode, on the CPU, side by side in one run.

Two launch-bound workloads of small CPU tensors (the op itself costs a few microseconds, as a
kernel launch does):
  ops:  a loop of small elementwise, in-place, matmul and reduction ops (and views, which the mode
        passes through);
  step: a small transformer's training step (embedding, 2 blocks of attention and MLP, AdamW);
  gpt2: transformers' GPT-2 (12 layers as GPT-2 small, at width 64, vocabulary 1,000, batch 2 x 16;
        AdamW with foreach as on CUDA): GPT-2's op mix and call stacks (transformers on
        BENCH_EXTRA_PATH or installed; left out with --workloads).
Each runs untraced, under a TorchDispatchMode that passes every op straight through, and under
tracer's recording mode (tracer/capture/torch_mode.py, recorder on device "cpu"; the clock and the
external-correlation push/pop are C builtins standing in for cupti-python's calls), each of these
with and without torch._dynamo imported (once it is, every mode's dispatch runs under Dynamo's
`disable`, as it does under transformers). --baseline DIR also runs the recording mode with DIR's
tracer (an older checkout), so before and after show side by side. Every configuration runs in its
own child process (Dynamo's import is process-wide), repeats interleaved; per-op microseconds of
wall and CPU time (medians), tracer's own time around each op (its Timing hook "dispatch": the
mode's work minus the op's), and the load average before and after.

    python scripts/bench_dispatch_mode.py [--repeats 3] [--iters 2000] [--baseline DIR] [--profile OUT.prof]

--profile: cProfile of the recording mode on the ops workload (this tree, Dynamo imported), top
functions by own time."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ("untraced", "bare", "passthrough", "recording")
WORKLOADS = ("ops", "step", "gpt2")

CHILD = r'''
import json, sys, time
config, workload, iters, dynamo, profile = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
import torch
from torch.utils._python_dispatch import TorchDispatchMode
if dynamo:
    import torch._dynamo  # noqa: F401
torch.manual_seed(0)
torch.set_num_threads(1)


class Count(TorchDispatchMode):
    n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        Count.n += 1
        return func(*args, **(kwargs or {}))


class PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **kwargs) if kwargs else func(*args)


class Bare(TorchDispatchMode):  # never under Dynamo's `disable`
    @classmethod
    def _should_skip_dynamo(cls):
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **kwargs) if kwargs else func(*args)


def ops_workload():
    x, b, w = torch.randn(64), torch.randn(64), torch.randn(8, 8)

    def run():
        y = x * 1.5
        y.add_(b)
        z = torch.relu(y)
        m = z.view(8, 8) @ w
        m.t().contiguous()
        return m.sum()
    return run


def step_workload():
    nn = torch.nn
    d, vocab, seq = 32, 64, 16

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, h):
            q, k, v = self.qkv(self.ln1(h)).view(h.shape[0], seq, 3, 2, d // 2).unbind(2)
            a = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                                 is_causal=True)
            h = h + self.proj(a.transpose(1, 2).reshape(h.shape))
            return h + self.out(torch.nn.functional.gelu(self.fc(self.ln2(h))))

    emb, blocks, head = nn.Embedding(vocab, d), nn.Sequential(Block(), Block()), nn.Linear(d, vocab)
    params = [*emb.parameters(), *blocks.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    ids = torch.randint(0, vocab, (2, seq))

    def run():
        logits = head(blocks(emb(ids)))
        loss = torch.nn.functional.cross_entropy(logits.view(-1, vocab), ids.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return run


def gpt2_workload():
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config(n_embd=64, n_head=4, vocab_size=1000, n_positions=64))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)  # as on CUDA, where foreach is the default
    ids = torch.randint(0, 1000, (2, 16))

    def run():
        model(ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return run


run = {"ops": ops_workload, "step": step_workload, "gpt2": gpt2_workload}[workload]()
for _ in range(20):
    run()
with Count():
    run()
ops_per_iter = Count.n
n = max(1, iters // {"ops": 1, "step": 40, "gpt2": 200}[workload])
mode = None
if config == "passthrough":
    mode = PassThrough()
elif config == "bare":
    mode = Bare()
elif config == "recording":
    from tracer.capture.memory_recorder import MemoryRecorder
    from tracer.capture.timing import Timing
    from tracer.capture.torch_mode import make_mode
    rec = MemoryRecorder(time.perf_counter_ns, abs, time.monotonic_ns, devices=("cpu",))
    rec.frees_seen = True  # as on a GPU, where the caching allocator reports frees (the storage-less lookup)
    timing = Timing()
    mode = make_mode(rec, torch, timing)
if mode is not None:
    mode.__enter__()
for _ in range(5):
    run()
prof = None
if profile != "-":
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
if config == "recording":
    hook = timing.hook("dispatch")
    hook[0], hook[1] = 0, 0.0
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(n):
    run()
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
if prof is not None:
    prof.disable()
    prof.dump_stats(profile)
if mode is not None:
    mode.__exit__(None, None, None)
extra = {"recorded_ops": len(rec.ops), "accesses": len(rec.accesses), "own_s": hook[1]} if config == "recording" else {}
print(json.dumps({"ops": ops_per_iter * n, "wall": wall, "cpu": cpu, **extra}))
'''


def child(tree: Path, config: str, workload: str, iters: int, dynamo: bool, profile: str = "-") -> dict:
    extra = os.environ.get("BENCH_EXTRA_PATH")  # where transformers is, for the gpt2 workload
    env = dict(os.environ, PYTHONPATH=str(tree) + (f":{extra}" if extra else ""), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, config, workload, str(iters), str(int(dynamo)), profile],
                         env=env, cwd=tree, capture_output=True, text=True, timeout=900, check=False)  # `-c`: cwd comes first on sys.path
    if out.returncode != 0:
        raise SystemExit(f"{config}/{workload} (dynamo {dynamo}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iters", type=int, default=2000, help="ops workload iterations (the step: iters / 40)")
    ap.add_argument("--baseline", type=Path, help="another checkout's tracer: its recording mode beside this tree's")
    ap.add_argument("--profile", help="cProfile the recording mode (ops, Dynamo imported) into this file instead")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    ap.add_argument("--dynamo", choices=("both", "yes", "no"), default="both", help="with torch._dynamo imported, without, or both")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.profile:
        child(ROOT, "recording", "ops", args.iters, True, args.profile)
        import pstats

        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)
        return 0
    trees = {"this tree": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    dynamo = {"both": (False, True), "yes": (True,), "no": (False,)}[args.dynamo]
    configs = [c for c in args.configs.split(",") if c in CONFIGS]
    cases = [(c, "this tree", d) for c in configs for d in dynamo]
    cases += [("recording", "baseline", d) for d in dynamo if args.baseline and "recording" in configs]
    load0 = os.getloadavg()
    print(f"load average {load0[0]:.2f} {load0[1]:.2f} on {os.cpu_count()} CPUs at the start", flush=True)
    runs: dict[tuple, list[dict]] = {}
    workloads = [w for w in args.workloads.split(",") if w in WORKLOADS]
    for rep in range(args.repeats):
        for w in workloads:
            for config, tree, dyn in cases:
                r = child(trees[tree], config, w, args.iters, dyn)
                runs.setdefault((w, config, tree, dyn), []).append(r)
        print(f"repeat {rep} done", flush=True)
    load1 = os.getloadavg()
    print(f"load average {load1[0]:.2f} {load1[1]:.2f} at the end")
    rows = []
    for (w, config, tree, dyn), rs in runs.items():
        us = statistics.median(1e6 * r["wall"] / r["ops"] for r in rs)
        cpu = statistics.median(1e6 * r["cpu"] / r["ops"] for r in rs)
        own = statistics.median(1e6 * r["own_s"] / r["ops"] for r in rs) if "own_s" in rs[0] else None
        rows.append({"workload": w, "config": config, "tree": tree, "dynamo": dyn, "us_per_op": us, "cpu_us_per_op": cpu,
                     "own_us_per_op": own, "ops": rs[0]["ops"], "recorded_ops": rs[0].get("recorded_ops")})
    print(f"\nper-op microseconds (median of {args.repeats}; wall / CPU); x: over untraced, +: over pass-through")
    for w in workloads:
        for dyn in dynamo:
            mine = [r for r in rows if r["workload"] == w and r["dynamo"] == dyn]
            base = next((r for r in mine if r["config"] == "untraced"), mine[0])
            thru = next((r for r in mine if r["config"] == "passthrough"), base)
            print(f"{w} ({base['ops']} dispatched ops), Dynamo {'imported' if dyn else 'not imported'}:")
            for r in mine:
                rec = (f"  recorded {r['recorded_ops']}, tracer's own {r['own_us_per_op']:.2f} us"
                       if r["recorded_ops"] is not None else "")
                print(f"  {r['config'] + ' (' + r['tree'] + ')':<28} {r['us_per_op']:7.2f} / {r['cpu_us_per_op']:7.2f} us"
                      f"  {r['us_per_op'] / base['us_per_op']:5.2f}x  +{r['us_per_op'] - thru['us_per_op']:6.2f} us{rec}")
    if args.json:
        Path(args.json).write_text(json.dumps({"load": [load0, load1], "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
