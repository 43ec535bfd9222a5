"""Cast-transpose bandwidth on a GPU, side by side in one run: device-to-device copy, every
fence variant, and the torch composite (to(float8) + .t().contiguous() + abs().amax()).

Effective bandwidth counts bytes read + written once. Usage:
    python scripts/bench_cast_transpose.py [--shapes 4096x4096,8192x8192] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from tracer.kernelspec import FENCE_VARIANTS, InDtype, OutFormat, Variant, all_configs
from tracer.launch import cast_transpose

ROTATE = 4  # input sets rotated so that repeated runs do not measure the 60 MB L2


def time_ms(fn, reps: int = 50, warmup: int = 5) -> float:
    for i in range(warmup):
        fn(i)
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def bench_shape(rows: int, cols: int) -> list[dict]:
    xs = [torch.randn(rows, cols, device="cuda").to(torch.bfloat16) for _ in range(ROTATE)]
    n = rows * cols
    moved = n * 2 + n * 2  # bf16 read, two FP8 copies written
    scale = torch.tensor([2.0, 0.0], device="cuda")
    sinv, amax = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    outs = [(torch.empty(rows, cols, dtype=torch.float8_e4m3fn, device="cuda"),
             torch.empty(cols, rows, dtype=torch.float8_e4m3fn, device="cuda")) for _ in range(ROTATE)]
    results = []

    src = [torch.empty(moved // 2, dtype=torch.uint8, device="cuda") for _ in range(ROTATE)]
    dst = [torch.empty_like(s) for s in src]
    ms = time_ms(lambda i: dst[i % ROTATE].copy_(src[i % ROTATE]))
    copy_bw = moved / ms / 1e6
    results.append({"shape": f"{rows}x{cols}", "what": "d2d copy (same bytes)", "ms": ms, "GBps": copy_bw})

    for v in FENCE_VARIANTS:
        ms = time_ms(lambda i, v=v: cast_transpose(xs[i % ROTATE], scale, sinv, amax, out_format=OutFormat.E4M3,
                                              variant=v, out=outs[i % ROTATE]))
        results.append({"shape": f"{rows}x{cols}", "what": v.value, "ms": ms, "GBps": moved / ms / 1e6})

    def composite(i: int) -> None:
        x = xs[i % ROTATE]
        y = (x.float() * scale[0]).clamp(-448, 448).to(torch.float8_e4m3fn)
        y.t().contiguous()
        x.abs().amax()

    ms = time_ms(composite)
    results.append({"shape": f"{rows}x{cols}", "what": "torch composite", "ms": ms, "GBps": moved / ms / 1e6})
    for r in results:
        r["pct_of_copy"] = 100 * r["GBps"] / copy_bw
    return results


def sweep(rows: int, cols: int) -> list[dict]:
    """Every bf16 config of the `none` variant: the data behind the heuristic."""
    xs = [torch.randn(rows, cols, device="cuda").to(torch.bfloat16) for _ in range(ROTATE)]
    scale = torch.tensor([2.0, 0.0], device="cuda")
    sinv, amax = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    out = []
    for cfg in all_configs(InDtype.BF16):
        if not cfg.fits(InDtype.BF16, rows, cols):
            continue
        ms = time_ms(lambda i, cfg=cfg: cast_transpose(xs[i % ROTATE], scale, sinv, amax, variant=Variant.NONE, config=cfg),
                     reps=20)
        out.append({"shape": f"{rows}x{cols}", "config": str(cfg), "ms": ms, "GBps": rows * cols * 4 / ms / 1e6})
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096,8192x8192")
    ap.add_argument("--sweep", action="store_true", help="also time every config of the none variant")
    ap.add_argument("--json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_cast_transpose: no CUDA GPU visible", file=sys.stderr)
        return 4
    rows_all = []
    for shape in args.shapes.split(","):
        r, c = (int(v) for v in shape.split("x"))
        rows_all += bench_shape(r, c)
    print(f"device: {torch.cuda.get_device_name()}  ({torch.cuda.get_device_properties(0).multi_processor_count} SMs)")
    print(f"{'shape':<10} {'what':<24} {'ms':>8} {'GB/s':>8} {'% copy':>7} {'vs none':>8}")
    none = {r["shape"]: r["ms"] for r in rows_all if r["what"] == "none"}
    for r in rows_all:
        print(f"{r['shape']:<10} {r['what']:<24} {r['ms']:8.4f} {r['GBps']:8.0f} {r['pct_of_copy']:6.1f}% "
              f"{r['ms'] / none[r['shape']]:7.3f}x")
    sweeps = []
    if args.sweep:
        from tracer.kernelspec import pick_config
        from tracer.launch import num_sms

        for shape in args.shapes.split(","):
            r, c = (int(v) for v in shape.split("x"))
            res = sorted(sweep(r, c), key=lambda d: d["ms"])
            sweeps += res
            picked = str(pick_config(InDtype.BF16, r, c, num_sms()))
            print(f"config sweep {shape} (none): " + ", ".join(f"{d['config']} {d['GBps']:.0f}" for d in res[:6])
                  + f" ... heuristic picks {picked} ({next(d['GBps'] for d in res if d['config'] == picked):.0f} GB/s)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"results": rows_all, "sweep": sweeps}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
