"""The cast-transpose kernel family as data: variants, dtypes, configs and the config heuristic.

Pure: no CUDA, no torch. Everything a user can name is validated here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from tracer.errors import UsageError, unknown

THREADS = 256
WARPS = THREADS // 32
WIDTHS = (1, 2, 4, 8, 16)
# Blocks of the widest preferred patch resident per SM (64 registers x 256 threads on sm_90): the
# heuristic's estimate of how many tiles run at once.
BLOCKS_PER_SM = 4
MAX_SMS = 1024  # SMs of one GPU: H200 132, the largest parts of the report 188


class Variant(str, Enum):
    """Fence placement around the amax atomic, plus the planted-bug kernels."""

    NONE = "none"
    DEVICE_BEFORE_ATOMIC = "device_before_atomic"
    BLOCK_BEFORE_ATOMIC = "block_before_atomic"
    SYSTEM_BEFORE_ATOMIC = "system_before_atomic"
    DEVICE_AFTER_ATOMIC = "device_after_atomic"
    DEVICE_BEFORE_RETURN = "device_before_return"
    DEVICE_THREAD0_ONLY = "device_thread0_only"
    SYSTEM_SCOPE_ATOMIC = "system_scope_atomic"
    PLANTED_RACE = "planted_race"
    PLANTED_OOB = "planted_oob"
    PLANTED_UNINIT = "planted_uninit"
    PLANTED_BARRIER = "planted_barrier"

    @property
    def planted(self) -> bool:
        return self.value.startswith("planted_")

    @property
    def macro(self) -> str:
        return "VARIANT_" + self.name


VARIANT_DOC: dict[Variant, str] = {
    Variant.NONE: "no fence: stores, block amax reduce, one relaxed device-scope atomicMax per block",
    Variant.DEVICE_BEFORE_ATOMIC: "__threadfence() by every thread after the stores, before the amax reduce and atomic (the workaround)",
    Variant.BLOCK_BEFORE_ATOMIC: "__threadfence_block() by every thread after the stores, before the amax reduce and atomic",
    Variant.SYSTEM_BEFORE_ATOMIC: "__threadfence_system() by every thread after the stores, before the amax reduce and atomic",
    Variant.DEVICE_AFTER_ATOMIC: "__threadfence() by thread 0 right after its amax atomic",
    Variant.DEVICE_BEFORE_RETURN: "__threadfence() by every thread as the last statement of the kernel",
    Variant.DEVICE_THREAD0_ONLY: "__threadfence() by thread 0 only, after the stores, before the atomic",
    Variant.SYSTEM_SCOPE_ATOMIC: "atomicMax_system (system-scope atomic), no fence",
    Variant.PLANTED_RACE: "PLANTED BUG: no __syncthreads() between the shared-memory tile writes and the transposed reads",
    Variant.PLANTED_OOB: "PLANTED BUG: block 0 writes one byte 1 TiB past the rowwise output, outside every allocation",
    Variant.PLANTED_UNINIT: "PLANTED BUG: reads the scale from scale[1], a slot that is never written",
    Variant.PLANTED_BARRIER: "PLANTED BUG: __syncwarp() with a mask that leaves out half of the calling lanes",
}

FENCE_VARIANTS = tuple(v for v in Variant if not v.planted)


class InDtype(str, Enum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"

    @property
    def nbytes(self) -> int:
        return 4 if self is InDtype.FP32 else 2

    @property
    def code(self) -> int:
        return {InDtype.FP32: 0, InDtype.FP16: 1, InDtype.BF16: 2}[self]


class OutFormat(str, Enum):
    E4M3 = "e4m3"
    E5M2 = "e5m2"

    @property
    def max_finite(self) -> float:
        return 448.0 if self is OutFormat.E4M3 else 57344.0


# FP8 conversion instructions (cvt.rn.satfinite.e4m3x2.f32) exist from sm_89 on.
SUPPORTED_ARCHS = ("sm_89", "sm_90", "sm_100", "sm_120")


def unsupported_arch_reason(capability: tuple[int, int]) -> str | None:
    """Why tracer's kernels cannot run on a GPU of this compute capability (None: they can)."""
    arch = f"sm_{capability[0]}{capability[1]}"
    if arch in SUPPORTED_ARCHS:
        return None
    return f"the GPU is {arch}; tracer's kernels are built for {', '.join(SUPPORTED_ARCHS)} only"


def parse_arch(arch: str) -> str:
    if arch not in SUPPORTED_ARCHS:
        raise unknown("arch", arch, SUPPORTED_ARCHS)
    return arch


def parse_variant(name: str) -> Variant:
    try:
        return Variant(name)
    except ValueError:
        raise unknown("variant", name, [v.value for v in Variant]) from None


def parse_in_dtype(name: str) -> InDtype:
    try:
        return InDtype(name)
    except ValueError:
        raise unknown("input dtype", name, [d.value for d in InDtype]) from None


def parse_out_format(name: str) -> OutFormat:
    try:
        return OutFormat(name)
    except ValueError:
        raise unknown("output format", name, [f.value for f in OutFormat]) from None


@dataclass(frozen=True, order=True)
class Config:
    """Vector widths in bytes. Each thread loads `store` rows of `load` bytes each (a patch of
    store x load/elem_size elements), writes each row's FP8 straight to the rowwise output
    (load/elem_size bytes) and each column's `store` FP8 bytes, through shared memory, to the
    columnwise output."""

    load: int
    store: int

    def __post_init__(self) -> None:
        for what, w in (("load", self.load), ("store", self.store)):
            if w not in WIDTHS:
                raise UsageError(f"{what} width {w} is not one of {', '.join(map(str, WIDTHS))} bytes")

    def __str__(self) -> str:
        return f"{self.load}/{self.store}"

    @classmethod
    def parse(cls, text: str) -> Config:
        parts = text.split("/")
        if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
            raise UsageError(f"config {text!r} is not LOAD/STORE in bytes, e.g. 16/8 (widths: {', '.join(map(str, WIDTHS))})")
        return cls(int(parts[0]), int(parts[1]))

    def load_elems(self, dtype: InDtype) -> int:
        return self.load // dtype.nbytes

    def tile(self, dtype: InDtype) -> tuple[int, int]:
        """(rows, cols) of the block tile: one patch row-slab per warp, one patch column per lane."""
        return WARPS * self.store, 32 * self.load_elems(dtype)

    def check_dtype(self, dtype: InDtype) -> None:
        if self.load < dtype.nbytes:
            raise UsageError(
                f"config {self}: load width {self.load} B is narrower than one {dtype.value} element ({dtype.nbytes} B)"
            )

    def check_shape(self, dtype: InDtype, rows: int, cols: int) -> None:
        """Raise with the reason when this config cannot run on a rows x cols input."""
        self.check_dtype(dtype)
        lv = self.load_elems(dtype)
        if cols % lv:
            raise UsageError(f"config {self}: {lv}-element {dtype.value} loads need cols % {lv} == 0, got cols={cols}")
        if rows % self.store:
            raise UsageError(f"config {self}: {self.store}-byte columnwise stores need rows % {self.store} == 0, got rows={rows}")

    def fits(self, dtype: InDtype, rows: int, cols: int) -> bool:
        try:
            self.check_shape(dtype, rows, cols)
        except UsageError:
            return False
        return True

    def blocks(self, dtype: InDtype, rows: int, cols: int) -> int:
        tm, tn = self.tile(dtype)
        return -(-rows // tm) * -(-cols // tn)


def all_configs(dtype: InDtype) -> list[Config]:
    """Every config valid for this dtype, widest first."""
    cfgs = [Config(l, s) for l in WIDTHS for s in WIDTHS if l >= dtype.nbytes]
    return sorted(cfgs, key=lambda c: (c.load + c.store, c.load), reverse=True)


# Patch shapes (load elements per row, store bytes = rows per thread), best first, from the config
# sweep of scripts/bench_cast_transpose.py on an H200 (docs/benchmarks.md). Other configs are
# candidates only for shapes that no preferred patch fits.
PREFERRED_PATCHES = ((4, 16), (4, 8), (8, 8), (8, 4), (4, 4), (8, 16))


def pick_config(dtype: InDtype, rows: int, cols: int, num_sms: int) -> Config:
    """The heuristic. Candidates: the preferred patches that fit the shape (widths divide it), else
    every fitting config, widest first. Take the first candidate that gives every SM a tile and does
    not leave a short second round: more tiles than BLOCKS_PER_SM x num_sms can run at once, but
    at most twice that (there the next, smaller patch keeps the GPU fuller). If no candidate
    qualifies, the one with the most tiles."""
    if rows < 1 or cols < 1:
        raise UsageError(f"shape {rows}x{cols}: both dimensions must be >= 1")
    if not 1 <= num_sms <= MAX_SMS:
        raise UsageError(f"--sms {num_sms} is not an SM count (allowed: 1 to {MAX_SMS}; H200 has 132)")
    fitting = [c for c in all_configs(dtype) if c.fits(dtype, rows, cols)]
    by_patch = {(c.load_elems(dtype), c.store): c for c in fitting}
    candidates = [by_patch[p] for p in PREFERRED_PATCHES if p in by_patch] or fitting
    at_once = BLOCKS_PER_SM * num_sms
    for cfg in candidates:
        tiles = cfg.blocks(dtype, rows, cols)
        if tiles >= num_sms and not at_once < tiles <= 2 * at_once:
            return cfg
    return max(candidates, key=lambda c: (c.blocks(dtype, rows, cols), c.load + c.store))


@dataclass(frozen=True, kw_only=True)
class KernelKey:
    """Everything that selects one compiled kernel."""

    variant: Variant
    config: Config
    in_dtype: InDtype
    out_format: OutFormat
    arch: str

    def __post_init__(self) -> None:
        self.config.check_dtype(self.in_dtype)
        parse_arch(self.arch)

    def macros(self) -> list[tuple[str, str]]:
        tm, tn = self.config.tile(self.in_dtype)
        return [
            (self.variant.macro, "1"),
            ("ITYPE", str(self.in_dtype.code)),
            ("OFMT", "0" if self.out_format is OutFormat.E4M3 else "1"),
            ("LOAD_BYTES", str(self.config.load)),
            ("STORE_BYTES", str(self.config.store)),
            ("TILE_M", str(tm)),
            ("TILE_N", str(tn)),
            ("NTHREADS", str(THREADS)),
        ]


MAX_SIDE = 1 << 20  # a 2**20 x 2**20 tensor of one byte is 1 TiB, beyond any GPU's memory


def parse_shape(text: str) -> tuple[int, int]:
    """ROWSxCOLS with positive integers (ASCII digits: str.isdigit also takes '²', which int() refuses)."""
    m = re.fullmatch(r"([0-9]+)x([0-9]+)", text.lower())
    if m is None or not all(0 < int(g) <= MAX_SIDE for g in m.groups()):
        raise UsageError(f"shape {text!r} is not ROWSxCOLS with integers from 1 to {MAX_SIDE:,}, e.g. 4096x4096")
    return int(m.group(1)), int(m.group(2))
