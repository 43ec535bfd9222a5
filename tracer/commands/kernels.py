"""`tracer kernels`: list, ptx, sass, diff and config of the cast-transpose family."""
from __future__ import annotations

import argparse

from tracer.kernel.spec import (SUPPORTED_ARCHS, Config, InDtype, KernelKey, OutFormat, parse_arch, parse_in_dtype,
                                parse_out_format, parse_shape, parse_variant, pick_config)
from tracer.kernel.text import changed_lines, format_list, format_summary, variant_names

DEFAULT_ARCH = "sm_90"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kernels", help="the cast-transpose kernel family: variants, PTX, SASS, codegen diffs")
    ks = p.add_subparsers(dest="kernels_command", metavar="ACTION", required=True)
    lst = ks.add_parser("list", help="variants, what each fence does, and the configs")
    lst.add_argument("--dtype", default="bf16", help="input dtype for the config list (bf16, fp16, fp32)")
    lst.set_defaults(func=cmd_list)
    for name, func, helptext in (("ptx", cmd_ptx, "print the PTX of a variant"), ("sass", cmd_sass, "print the SASS and its summary")):
        q = ks.add_parser(name, help=helptext, description=f"{helptext}. Variants: {variant_names()}.")
        q.add_argument("variant", help=f"one of: {variant_names()}")
        _key_options(q)
        q.set_defaults(func=func)
    d = ks.add_parser("diff", help="per-variant SASS summary of A and B and the diff of their opcodes")
    d.add_argument("a", help=f"variant A, one of: {variant_names()}")
    d.add_argument("b", help="variant B")
    _key_options(d)
    d.add_argument("--full", action="store_true", help="print the whole opcode diff, not only the summary")
    d.set_defaults(func=cmd_diff)
    c = ks.add_parser("config", help="the config the heuristic picks for a shape and SM count")
    c.add_argument("--shape", required=True, help="ROWSxCOLS, e.g. 4096x4096")
    c.add_argument("--sms", type=int, default=132, help="SM count (H200: 132; the failing GPUs of the report: 170 or 188)")
    c.add_argument("--dtype", default="bf16", help="input dtype: bf16, fp16, fp32")
    c.set_defaults(func=cmd_config)


def _key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="16/16", help="LOAD/STORE vector widths in bytes (default 16/16)")
    p.add_argument("--arch", default=DEFAULT_ARCH, help=f"target architecture: {', '.join(SUPPORTED_ARCHS)} (default {DEFAULT_ARCH})")
    p.add_argument("--dtype", default="bf16", help=f"input dtype: {', '.join(d.value for d in InDtype)}")
    p.add_argument("--format", default="e4m3", help=f"output FP8 format: {', '.join(f.value for f in OutFormat)}")


def key_from_args(args: argparse.Namespace, variant: str) -> KernelKey:
    return KernelKey(variant=parse_variant(variant), config=Config.parse(args.config), in_dtype=parse_in_dtype(args.dtype),
                     out_format=parse_out_format(args.format), arch=parse_arch(args.arch))


def cmd_list(args: argparse.Namespace) -> int:
    print(format_list(parse_in_dtype(args.dtype)))
    return 0


def cmd_ptx(args: argparse.Namespace) -> int:
    from tracer.kernel import compile as nvrtc_compile

    print(nvrtc_compile.ptx(key_from_args(args, args.variant)))
    return 0


def _summary(key: KernelKey, text: str) -> str:
    from tracer.kernel import compile as nvrtc_compile
    from tracer.kernel import disasm

    return format_summary(nvrtc_compile.describe(key), disasm.summarize(text, disasm.resource_usage(key)))


def cmd_sass(args: argparse.Namespace) -> int:
    from tracer.kernel import disasm

    key = key_from_args(args, args.variant)
    text = disasm.sass(key)
    print(text)
    print(_summary(key, text))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from tracer.kernel import disasm

    keys = [key_from_args(args, v) for v in (args.a, args.b)]
    texts = [disasm.sass(k) for k in keys]
    for key, text in zip(keys, texts):
        print(_summary(key, text))
    diff = disasm.opcode_diff(texts[0], texts[1], args.a, args.b)
    print(f"\nopcode stream: {changed_lines(diff)} lines differ" + ("" if args.full else " (--full prints the diff)"))
    if args.full:
        print(diff)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    dtype = parse_in_dtype(args.dtype)
    rows, cols = parse_shape(args.shape)
    cfg = pick_config(dtype, rows, cols, args.sms)
    tm, tn = cfg.tile(dtype)
    print(f"{rows}x{cols} {dtype.value} on {args.sms} SMs -> config {cfg} (tile {tm}x{tn}, {cfg.blocks(dtype, rows, cols)} tiles)")
    return 0
