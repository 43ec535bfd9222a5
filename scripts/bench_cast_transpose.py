"""Cast-transpose bandwidth on a GPU, side by side in one run: device-to-device copy, every
fence variant, and the torch composite (to(float8) + .t().contiguous() + abs().amax()).

Effective bandwidth counts bytes read + written once. Usage:
    python scripts/bench_cast_transpose.py [--shapes 4096x4096,8192x8192] [--json OUT.json]
    python scripts/bench_cast_transpose.py --floor [SHAPES] [--floor-config 8/8]   # what a fence adds, in us
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable

import torch

from tracer.kernel.spec import FENCE_VARIANTS, Config, InDtype, OutFormat, Variant, all_configs
from tracer.kernel.spec import parse_shape
from tracer.errors import TracerError, UsageError
from tracer.kernel.launch import cast_transpose

ROTATE = 4  # input sets rotated so that repeated runs do not measure the 60 MB L2
COPY = "d2d copy (same bytes)"
SPIN_CYCLES = 20_000_000  # ~10 ms on an H200: longer than the host needs to queue one batch


def time_many(fns: dict[str, Callable[[int], object]], reps: int = 30, warmup: int = 5, batch: int = 16) -> dict[str, float]:
    """Median GPU time of one call of each fn. The fns take turns batch by batch, so drift of the
    shared machine hits all alike; each timed batch is queued behind a GPU spin, so the events
    measure the calls back to back on the GPU and not the host's launch overhead (which at
    4096x4096 is as long as the kernel)."""
    for fn in fns.values():
        for i in range(warmup):
            fn(i)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(reps):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SPIN_CYCLES)
            start.record()
            for i in range(batch):
                fn(r * batch + i)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / batch)
    return {name: statistics.median(t) for name, t in times.items()}


def inputs(rows: int, cols: int) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    xs = [torch.randn(rows, cols, device="cuda").to(torch.bfloat16) for _ in range(ROTATE)]
    scale = torch.tensor([2.0, 0.0], device="cuda")
    return xs, scale, torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")


def bench_shape(rows: int, cols: int) -> list[dict]:
    xs, scale, sinv, amax = inputs(rows, cols)
    n = rows * cols
    moved = n * 2 + n * 2  # bf16 read, two FP8 copies written
    outs = [(torch.empty(rows, cols, dtype=torch.float8_e4m3fn, device="cuda"),
             torch.empty(cols, rows, dtype=torch.float8_e4m3fn, device="cuda")) for _ in range(ROTATE)]
    src = [torch.empty(moved // 2, dtype=torch.uint8, device="cuda") for _ in range(ROTATE)]
    dst = [torch.empty_like(s) for s in src]

    def composite(i: int) -> None:
        x = xs[i % ROTATE]
        y = (x.float() * scale[0]).clamp(-448, 448).to(torch.float8_e4m3fn)
        y.t().contiguous()
        x.abs().amax()

    fns: dict[str, Callable[[int], object]] = {COPY: lambda i: dst[i % ROTATE].copy_(src[i % ROTATE])}
    for v in FENCE_VARIANTS:
        fns[v.value] = lambda i, v=v: cast_transpose(xs[i % ROTATE], scale, sinv, amax, out_format=OutFormat.E4M3,
                                                     variant=v, out=outs[i % ROTATE])
    fns["torch composite"] = composite
    ms = time_many(fns)
    copy_bw = moved / ms[COPY] / 1e6
    return [{"shape": f"{rows}x{cols}", "what": name, "ms": t, "GBps": moved / t / 1e6,
             "pct_of_copy": 100 * moved / t / 1e6 / copy_bw} for name, t in ms.items()]


def sweep(rows: int, cols: int) -> list[dict]:
    """Every bf16 config of the `none` variant: the data behind the heuristic."""
    xs, scale, sinv, amax = inputs(rows, cols)
    fns: dict[str, Callable[[int], object]] = {
        str(cfg): lambda i, cfg=cfg: cast_transpose(xs[i % ROTATE], scale, sinv, amax, variant=Variant.NONE, config=cfg)
        for cfg in all_configs(InDtype.BF16) if cfg.fits(InDtype.BF16, rows, cols)}
    return [{"shape": f"{rows}x{cols}", "config": name, "ms": ms, "GBps": rows * cols * 4 / ms / 1e6}
            for name, ms in time_many(fns, reps=10).items()]


GRID_VARIANTS = (Variant.NONE, Variant.DEVICE_BEFORE_ATOMIC, Variant.SYSTEM_BEFORE_ATOMIC, Variant.DEVICE_BEFORE_RETURN)


def grid_sweep(rows: int, cols: int, blocks: list[int]) -> list[dict]:
    """Launch policies side by side: 1, 2, 4 or 8 tiles per block and persistent grids (1x and 2x the
    resident blocks), or the given block counts, for `none` and the fences that cost most; the fence
    is paid once per block."""
    from tracer.kernel.spec import pick_config
    from tracer.kernel.launch import num_sms

    cfg = pick_config(InDtype.BF16, rows, cols, num_sms())
    xs, scale, sinv, amax = inputs(rows, cols)
    tiles = cfg.blocks(InDtype.BF16, rows, cols)
    if blocks:
        policies = [(f"{b} blocks", b) for b in blocks]
    else:
        fit = resident(cfg)
        policies = [(f"{k} tiles/block", -(-tiles // k)) for k in (1, 2, 3, 4, 8)] + [("resident", fit), ("2x resident", 2 * fit)]
    fns: dict[str, Callable[[int], object]] = {}
    for name, grid in policies:
        for v in GRID_VARIANTS:
            fns[f"{name}|{grid}|{v.value}"] = lambda i, v=v, grid=grid: cast_transpose(xs[i % ROTATE], scale, sinv, amax,
                                                                                     variant=v, grid=grid)
    out = []
    for key, ms in time_many(fns, reps=15).items():
        name, grid, variant = key.split("|")
        out.append({"shape": f"{rows}x{cols}", "grid": name, "blocks": min(int(grid), tiles), "variant": variant,
                    "ms": ms, "GBps": rows * cols * 4 / ms / 1e6})
    return out


FLOOR_VARIANTS = (*GRID_VARIANTS, Variant.DEVICE_THREAD0_ONLY)
FLOOR_SHAPES = "8x128,64x128,64x16896,1280x4224,2048x4096,4096x4096,4096x8192,8192x8192"


def floor_table(shapes: str, config: str) -> list[dict]:
    """What a fence adds to a launch, in us, from one tile up to many waves at one config: if it is a
    fixed wait at the end of each wave, the added us stay flat while the launch grows."""
    cfg = Config.parse(config)
    dims = [parse_shape(s) for s in shapes.split(",")]
    for rows, cols in dims:
        cfg.check_shape(InDtype.BF16, rows, cols)
    return [row for rows, cols in dims for row in floor_shape(rows, cols, cfg)]


def floor_shape(rows: int, cols: int, cfg: Config) -> list[dict]:
    from tracer.kernel.launch import default_grid

    xs, scale, sinv, amax = inputs(rows, cols)
    fns: dict[str, Callable[[int], object]] = {
        v.value: lambda i, v=v: cast_transpose(xs[i % ROTATE], scale, sinv, amax, variant=v, config=cfg)
        for v in FLOOR_VARIANTS}
    ms = time_many(fns)
    tiles = cfg.blocks(InDtype.BF16, rows, cols)
    blocks = default_grid(resident(cfg), tiles)
    return [{"shape": f"{rows}x{cols}", "config": str(cfg), "tiles": tiles, "blocks": blocks, "variant": name,
             "us": 1e3 * t, "added_us": 1e3 * (t - ms["none"]), "pct": 100 * (t / ms["none"] - 1)}
            for name, t in ms.items()]


def resident(cfg: Config) -> int:
    from tracer.kernel.spec import KernelKey
    from tracer.kernel.launch import device_arch, resident_blocks

    return resident_blocks(KernelKey(variant=Variant.NONE, config=cfg, in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch=device_arch()), 0)


def added(d: dict) -> str:
    return f"+{d['added_us']:.2f} us ({d['pct']:+.1f}%)"


def print_floor(rows: list[dict]) -> None:
    print(f"fence floor ({rows[0]['config']}): us per launch, and what each fence adds to `none`")
    print(f"{'shape':<11} {'tiles':>6} {'blocks':>6} {'none us':>8} " + " ".join(f"{v.value:>22}" for v in FLOOR_VARIANTS[1:]))
    for i in range(0, len(rows), len(FLOOR_VARIANTS)):
        group = rows[i:i + len(FLOOR_VARIANTS)]
        cells = " ".join(f"{added(d):>22}" for d in group[1:])
        print(f"{group[0]['shape']:<11} {group[0]['tiles']:>6} {group[0]['blocks']:>6} {group[0]['us']:8.2f} {cells}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096,8192x8192")
    ap.add_argument("--sweep", action="store_true", help="also time every config of the none variant")
    ap.add_argument("--sweep-only", action="store_true", help="only the config sweep (no fence table)")
    ap.add_argument("--grid-sweep", nargs="?", const="", metavar="BLOCKS",
                    help="also compare launch policies (tiles per block; or the given block counts, e.g. 512,660)")
    ap.add_argument("--floor", nargs="?", const=FLOOR_SHAPES, metavar="SHAPES",
                    help=f"only what each fence adds per launch, from one tile up (default shapes {FLOOR_SHAPES})")
    ap.add_argument("--floor-config", default="8/8", help="config of the --floor launches (default 8/8)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_cast_transpose: no CUDA GPU visible", file=sys.stderr)
        return 4
    try:
        doc = run_floor(args) if args.floor else run_tables(args)
    except TracerError as exc:
        print(f"bench_cast_transpose: {exc}", file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0


def run_floor(args: argparse.Namespace) -> dict:
    floor = floor_table(args.floor, args.floor_config)
    print_floor(floor)
    return {"floor": floor}


def block_counts(text: str) -> list[int]:
    counts = [b for b in text.split(",") if b]
    if not all(b.isdigit() and int(b) > 0 for b in counts):
        raise UsageError(f"--grid-sweep {text!r} is not a comma-separated list of positive block counts, e.g. 512,660")
    return [int(b) for b in counts]


def run_tables(args: argparse.Namespace) -> dict:
    shapes = [parse_shape(s) for s in args.shapes.split(",")]
    counts = block_counts(args.grid_sweep) if args.grid_sweep is not None else []
    rows_all = []
    for r, c in [] if args.sweep_only else shapes:
        rows_all += bench_shape(r, c)
    print(f"device: {torch.cuda.get_device_name()}  ({torch.cuda.get_device_properties(0).multi_processor_count} SMs)")
    print(f"{'shape':<10} {'what':<24} {'ms':>8} {'GB/s':>8} {'% copy':>7} {'vs none':>8}")
    none = {r["shape"]: r["ms"] for r in rows_all if r["what"] == "none"}
    for r in rows_all:
        print(f"{r['shape']:<10} {r['what']:<24} {r['ms']:8.4f} {r['GBps']:8.0f} {r['pct_of_copy']:6.1f}% "
              f"{r['ms'] / none[r['shape']]:7.3f}x")
    sweeps = []
    if args.sweep or args.sweep_only:
        from tracer.kernel.spec import pick_config
        from tracer.kernel.launch import num_sms

        for r, c in shapes:
            res = sorted(sweep(r, c), key=lambda d: d["ms"])
            sweeps += res
            picked = str(pick_config(InDtype.BF16, r, c, num_sms()))
            print(f"config sweep {r}x{c} (none): " + ", ".join(f"{d['config']} {d['GBps']:.0f}" for d in res[:6])
                  + f" ... heuristic picks {picked} ({next(d['GBps'] for d in res if d['config'] == picked):.0f} GB/s)")
    grids = []
    if args.grid_sweep is not None:
        for r, c in shapes:
            res = grid_sweep(r, c, counts)
            grids += res
            for d in res:
                print(f"grid {d['shape']} {d['grid']:<12} ({d['blocks']:>5} blocks) {d['variant']:<22} {d['GBps']:7.0f} GB/s {1e3 * d['ms']:7.2f} us")
    return {"results": rows_all, "sweep": sweeps, "grid": grids}


if __name__ == "__main__":
    sys.exit(main())
