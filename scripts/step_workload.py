"""A training loop timed per step, for scripts/bench_memory_capture.py --per-step: each step inside
an NVTX range `stepN` (torch.cuda.nvtx, so `trace run --memory-steps A:B` can window it) and ended
by a device synchronize; prints {"steps_s": [...], "steps_cpu_s": [...]} (wall and process CPU seconds) as its last line.

    python scripts/step_workload.py linear_backward|gpt2|gpt2-big [--steps N] [--profile OUT.prof] [--mode MODE]

linear_backward: tracer's FP8 linear workload (its Engine, one step per stepN range); gpt2: GPT-2
small built from transformers' GPT2Config (no download), AdamW, batch 4 x 256 tokens (launch-bound:
about 16 us of GPU work per op); gpt2-big: the same model at 16 x 1024 tokens (GPU-bound steps).
--profile: cProfile of the steps (the dispatch mode and CUPTI callbacks run inside them).
--mode passthrough: untraced, but every op through a TorchDispatchMode that passes it straight on;
--mode recording: untraced, but under tracer's recording dispatch mode and allocator hooks as
`--memory` enters them, with no CUPTI (its clock and external ids stand in: time.perf_counter_ns, no
push): the Python side of `--memory` alone; its hook timings are printed too."""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable


def linear_backward(steps: int) -> Callable[[int], None]:
    from tracer.workloads.engine import Engine
    from tracer.workloads.spec import resolve_workload

    engine = Engine(resolve_workload("linear_backward", steps=steps))
    return engine.step


def gpt2(steps: int, batch: int = 4, tokens: int = 256) -> Callable[[int], None]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (batch, tokens), device="cuda")

    def step(_: int) -> None:
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def gpt2_big(steps: int) -> Callable[[int], None]:
    return gpt2(steps, batch=16, tokens=1024)


MODELS = {"linear_backward": linear_backward, "gpt2": gpt2, "gpt2-big": gpt2_big}


def enter_mode(name: str) -> dict[str, list[float]]:
    """Enter a dispatch mode without tracing (--mode); the hooks' [calls, seconds] cells."""
    import torch

    if name == "passthrough":
        from torch.utils._python_dispatch import TorchDispatchMode

        class PassThrough(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]  # torch's signature
                return func(*args, **kwargs) if kwargs else func(*args)

        PassThrough().__enter__()
        return {}
    from tracer.capture.memory_recorder import MemoryRecorder
    from tracer.capture.timing import Timing
    from tracer.capture.torch_mode import start_recording

    timing = Timing()
    rec = MemoryRecorder(time.perf_counter_ns, abs, time.monotonic_ns, devices=("cuda",))
    start_recording(rec, torch, timing=timing)
    return timing.hooks


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=tuple(MODELS))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--profile")
    ap.add_argument("--mode", choices=("none", "passthrough", "recording"), default="none")
    args = ap.parse_args()
    import torch

    step = MODELS[args.model](args.steps)
    hooks = enter_mode(args.mode) if args.mode != "none" else {}
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
    times, cpu = [], []
    for s in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None and s == 2:
            prof.enable()
        torch.cuda.nvtx.range_push(f"step{s}")
        step(s)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    if prof is not None:
        prof.disable()
        prof.dump_stats(args.profile)
    if hooks:
        print(json.dumps({"hooks": hooks}))
    print(json.dumps({"steps_s": times, "steps_cpu_s": cpu}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
