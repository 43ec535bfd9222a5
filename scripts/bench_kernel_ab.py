"""A/B of kernel edits: the fence variants compiled from the installed cast-transpose source and from
edited versions of it, each checked bit-exact against the installed kernel, then timed side by side
in one run (contenders take turns batch by batch, as in bench_cast_transpose.py).

    python scripts/bench_kernel_ab.py [--edit LABEL=scripts/ab/EDIT.yaml ...] [--source LABEL=FILE.cu ...]
        [--configs 8/16,8/8] [--shapes 4096x4096,8192x8192] [--variants none,device_before_atomic] [--json OUT]

An edit file holds `what` (one line on the idea) and `edits`: a list of {old, new} text replacements,
each old text found exactly once in kernels/cast_transpose.cu. Contenders are every source x config
(default config: the heuristic's); bf16 -> E4M3, default grid policy for each kernel's occupancy.
`vs none` is against the same contender's `none`; `vs first` against the first contender.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import yaml
from bench_cast_transpose import ROTATE, inputs, time_many

from tracer.kernel import compile as nvrtc_compile
from tracer.kernel.spec import FENCE_VARIANTS, Config, InDtype, KernelKey, OutFormat, Variant, parse_variant, pick_config
from tracer.kernel.launch import blocks_per_gpu, cast_transpose, default_grid, device_arch, launch_kernel, num_sms

Runner = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def sources(edits: list[str], files: list[str]) -> dict[str, str]:
    installed = nvrtc_compile.kernel_source()
    out = {"current": installed}
    for spec in edits:
        label, path = spec.split("=", 1)
        doc = yaml.safe_load(Path(path).read_text())
        out[label] = nvrtc_compile.apply_edits(installed, doc["edits"], path)
        print(f"{label}: {doc['what']}")
    for spec in files:
        label, path = spec.split("=", 1)
        out[label] = Path(path).read_text()
    return out


def runner(kernel: object, key: KernelKey, xs: list[torch.Tensor], scale: torch.Tensor, sinv: torch.Tensor,
           amax: torch.Tensor) -> Runner:
    rows, cols = xs[0].shape
    blocks = default_grid(blocks_per_gpu(kernel, 0), key.config.blocks(key.in_dtype, rows, cols))
    outs = [(torch.empty(rows, cols, dtype=torch.float8_e4m3fn, device="cuda"),
             torch.empty(cols, rows, dtype=torch.float8_e4m3fn, device="cuda")) for _ in range(ROTATE)]
    stream = torch.cuda.current_stream().cuda_stream

    def run(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, (row, col) = xs[i % ROTATE], outs[i % ROTATE]
        launch_kernel(kernel, blocks, (x.data_ptr(), row.data_ptr(), col.data_ptr(), scale.data_ptr(), sinv.data_ptr(),
                                       amax.data_ptr()), rows, cols, 0, stream)
        return row, col

    return run


def contender(label: str, cubin: bytes, key: KernelKey, xs: list[torch.Tensor], scale: torch.Tensor) -> Runner:
    """The launched kernel, after checking that its outputs, amax and scale_inv equal the installed
    kernel's bit for bit."""
    from cuda.core import ObjectCode

    kernel = ObjectCode.from_cubin(cubin).get_kernel(nvrtc_compile.KERNEL_NAME)
    sinv, amax, ref_sinv, ref_amax = (torch.zeros(1, device="cuda") for _ in range(4))
    ref = cast_transpose(xs[0], scale, ref_sinv, ref_amax, variant=key.variant, config=key.config)
    run = runner(kernel, key, xs, scale, sinv, amax)
    got = run(0)
    torch.cuda.synchronize()
    pairs = [*zip(got, (ref.rowwise, ref.columnwise)), (amax, ref_amax), (sinv, ref_sinv)]
    if not all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in pairs):
        raise SystemExit(f"bench_kernel_ab: {label} {key.variant.value} {key.config} differs from the installed kernel")
    return run


def bench_shape(srcs: dict[str, str], configs: list[Config] | None, variants: list[Variant], rows: int, cols: int) -> list[dict]:
    xs, scale, _, _ = inputs(rows, cols)
    cfgs = configs or [pick_config(InDtype.BF16, rows, cols, num_sms())]
    jobs = [(label, KernelKey(variant=v, config=cfg, in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch=device_arch()))
            for label in srcs for cfg in cfgs for v in variants]
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        cubins = list(pool.map(lambda job: nvrtc_compile.source_cubin(srcs[job[0]], job[1], f"{job[0]}.cu"), jobs))
    fns: dict[str, Callable[[int], object]] = {
        f"{label}@{key.config}|{key.variant.value}": contender(label, cubin, key, xs, scale)
        for (label, key), cubin in zip(jobs, cubins)}
    res = []
    for name, ms in time_many(fns).items():
        who, variant = name.split("|")
        res.append({"shape": f"{rows}x{cols}", "contender": who, "variant": variant, "ms": ms, "GBps": rows * cols * 4 / ms / 1e6})
    return res


def print_table(res: list[dict]) -> None:
    ms = {(r["shape"], r["contender"], r["variant"]): r["ms"] for r in res}
    for shape in dict.fromkeys(r["shape"] for r in res):
        who = list(dict.fromkeys(r["contender"] for r in res if r["shape"] == shape))
        print(f"\n{shape}: us, vs none, vs first" + "".join(f"\n  {chr(65 + i)} = {w}" for i, w in enumerate(who)))
        print(f"{'variant':<22}" + "".join(f" {chr(65 + i):>22}" for i in range(len(who))))
        for variant in dict.fromkeys(r["variant"] for r in res):
            cells = [(ms[shape, w, variant], ms[shape, w, variant] / ms[shape, w, "none"], ms[shape, w, variant] / ms[shape, who[0], variant])
                     for w in who]
            print(f"{variant:<22}" + "".join(f" {t * 1e3:8.2f} {n:6.3f} {f:6.3f}" for t, n, f in cells))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edit", action="append", default=[], help="LABEL=EDITS.yaml applied to the installed source (repeatable)")
    ap.add_argument("--source", action="append", default=[], help="LABEL=FILE.cu: a whole kernel source (repeatable)")
    ap.add_argument("--configs", help="LOAD/STORE configs, comma-separated (default: the heuristic's per shape)")
    ap.add_argument("--shapes", default="4096x4096,8192x8192")
    ap.add_argument("--variants", default=",".join(v.value for v in FENCE_VARIANTS))
    ap.add_argument("--json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_kernel_ab: no CUDA GPU visible", file=sys.stderr)
        return 4
    srcs = sources(args.edit, args.source)
    configs = [Config.parse(c) for c in args.configs.split(",")] if args.configs else None
    variants = [Variant.NONE] + [v for v in map(parse_variant, args.variants.split(",")) if v is not Variant.NONE]
    res = []
    for shape in args.shapes.split(","):
        r, c = (int(v) for v in shape.split("x"))
        res += bench_shape(srcs, configs, variants, r, c)
    print(f"device: {torch.cuda.get_device_name()}  ({num_sms()} SMs)")
    print_table(res)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
