"""`tracer kernels`: list, ptx, sass, diff and config of the cast-transpose family."""
from __future__ import annotations

import argparse

from tracer.kernel import compile as nvrtc_compile
from tracer.kernel import disasm
from tracer.kernel.spec import (
    BLOCKS_PER_SM,
    PREFERRED_PATCHES,
    VARIANT_DOC,
    Config,
    InDtype,
    KernelKey,
    Variant,
    all_configs,
    parse_arch,
    parse_in_dtype,
    parse_out_format,
    parse_variant,
    pick_config,
)
from tracer.errors import UsageError

DEFAULT_ARCH = "sm_90"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kernels", help="the cast-transpose kernel family: variants, PTX, SASS, codegen diffs")
    ks = p.add_subparsers(dest="kernels_command", metavar="ACTION", required=True)

    lst = ks.add_parser("list", help="variants, what each fence does, and the configs")
    lst.add_argument("--dtype", default="bf16", help="input dtype for the config list (bf16, fp16, fp32)")
    lst.set_defaults(func=cmd_list)

    for name, func, helptext in (("ptx", cmd_ptx, "print the PTX of a variant"), ("sass", cmd_sass, "print the SASS and its summary")):
        q = ks.add_parser(name, help=helptext)
        q.add_argument("variant")
        _key_options(q)
        q.set_defaults(func=func)

    d = ks.add_parser("diff", help="per-variant SASS summary of A and B and the diff of their opcodes")
    d.add_argument("a")
    d.add_argument("b")
    _key_options(d)
    d.add_argument("--full", action="store_true", help="print the whole opcode diff, not only the summary")
    d.set_defaults(func=cmd_diff)

    c = ks.add_parser("config", help="the config the heuristic picks for a shape and SM count")
    c.add_argument("--shape", required=True, help="ROWSxCOLS, e.g. 4096x4096")
    c.add_argument("--sms", type=int, default=132, help="SM count (H200: 132; the failing GPUs of the report: 170 or 188)")
    c.add_argument("--dtype", default="bf16")
    c.set_defaults(func=cmd_config)


def _key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="16/16", help="LOAD/STORE vector widths in bytes (default 16/16)")
    p.add_argument("--arch", default=DEFAULT_ARCH, help="target architecture (default sm_90)")
    p.add_argument("--dtype", default="bf16", help="input dtype: bf16, fp16, fp32")
    p.add_argument("--format", default="e4m3", help="output FP8 format: e4m3, e5m2")


def key_from_args(args: argparse.Namespace, variant: str) -> KernelKey:
    return KernelKey(
        parse_variant(variant), Config.parse(args.config), parse_in_dtype(args.dtype),
        parse_out_format(args.format), parse_arch(args.arch),
    )


def parse_shape(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"shape {text!r} is not ROWSxCOLS with positive integers, e.g. 4096x4096")
    return int(parts[0]), int(parts[1])


def cmd_list(args: argparse.Namespace) -> int:
    dtype = parse_in_dtype(args.dtype)
    print("Variants (fence placement around the amax atomic; planted_* carry one deliberate bug):")
    for v in Variant:
        print(f"  {v.value:<22} {VARIANT_DOC[v]}")
    print(f"\nConfigs for {dtype.value} input (LOAD/STORE bytes -> block tile rows x cols), widest first:")
    for cfg in all_configs(dtype):
        tm, tn = cfg.tile(dtype)
        print(f"  {str(cfg):<6} tile {tm}x{tn}")
    print("\nEach thread loads STORE rows x LOAD bytes, writes the rows' FP8 from registers and the columns'")
    print("STORE-byte vectors through shared memory. Heuristic: the first fitting config of the preferred")
    print("patches (elements per row x rows: " + ", ".join(f"{e}x{r}" for e, r in PREFERRED_PATCHES) + ") that gives")
    print(f"every SM a tile and does not leave a short second round (more than {BLOCKS_PER_SM} x SMs tiles, at most")
    print("twice that); else the one with the most tiles (see `tracer kernels config`).")
    return 0


def cmd_ptx(args: argparse.Namespace) -> int:
    print(nvrtc_compile.ptx(key_from_args(args, args.variant)))
    return 0


def cmd_sass(args: argparse.Namespace) -> int:
    key = key_from_args(args, args.variant)
    text = disasm.sass(key)
    print(text)
    print(format_summary(nvrtc_compile.describe(key), disasm.summarize(text, disasm.resource_usage(key))))
    return 0


def format_summary(name: str, s: disasm.SassSummary) -> str:
    fences = ", ".join(f"{f.opcode}@{f.offset:#x}" for f in s.fences) or "none"
    atomics = ", ".join(f"{a.opcode}@{a.offset:#x} (scope {a.scope or '?'})" for a in s.atomics) or "none"
    return (
        f"== {name}\n  registers {s.registers}, shared {s.shared_bytes} B, stack {s.stack_bytes} B, "
        f"{s.instructions} instructions\n  fences: {fences}\n  atomics: {atomics}\n  order: {s.order()}"
    )


def cmd_diff(args: argparse.Namespace) -> int:
    keys = [key_from_args(args, v) for v in (args.a, args.b)]
    texts = [disasm.sass(k) for k in keys]
    for key, text in zip(keys, texts):
        print(format_summary(nvrtc_compile.describe(key), disasm.summarize(text, disasm.resource_usage(key))))
    diff = disasm.opcode_diff(texts[0], texts[1], args.a, args.b)
    changed = sum(1 for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))
    print(f"\nopcode stream: {changed} lines differ" + ("" if args.full else " (--full prints the diff)"))
    if args.full:
        print(diff)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    dtype: InDtype = parse_in_dtype(args.dtype)
    rows, cols = parse_shape(args.shape)
    cfg = pick_config(dtype, rows, cols, args.sms)
    tm, tn = cfg.tile(dtype)
    print(f"{rows}x{cols} {dtype.value} on {args.sms} SMs -> config {cfg} (tile {tm}x{tn}, {cfg.blocks(dtype, rows, cols)} tiles)")
    return 0
