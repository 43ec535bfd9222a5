"""The seed workloads: an FP8 linear stack under DelayedScaling, forward and backward, with the
cast-transpose feeding the dgrad and wgrad GEMMs (torch._scaled_mm), every launch inside an NVTX
range named by position, and the corruption detector run on every step."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from tracer.fp8.detector import Check, Detector, Where, codes_mismatch, exact_diff, norm_ratio, relative_error
from tracer.fp8.ref import amax_of, torch_cast
from tracer.kernel.spec import Variant
from tracer.kernel.launch import cast_transpose, torch_fp8_dtype
from tracer.fp8.scaling import Role, ScalingState
from tracer.workloads.spec import Kind, WorkloadSpec

NVTX_DOMAIN = "tracer"
# The planted cross-stream races delay the producer on its stream by a GPU spin (about 2 ms on an
# H200) so the unordered consumer overtakes it whatever the host timing; without it the race shows
# up in a timing-dependent fraction of steps (all of them in one run, none in another).
PLANTED_DELAY_CYCLES = 4_000_000
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True, kw_only=True)
class Traits:
    """What a workload kind does differently from the others."""

    dgrad_only: bool  # one weight cast, cast-transpose and dgrad per step (an OUT x IN weight), not a linear stack
    side_stream: bool  # the dgrad runs on a second stream
    event_wait: bool  # ... which waits on the main stream (an event record -> wait edge)
    delayed_producer: bool  # a GPU spin before the cast-transpose, so an unordered dgrad overtakes it
    torch_cast: bool = False  # stock PyTorch ops instead of tracer's kernel (runs on the CPU too)


TRAITS = {
    Kind.CAST_TRANSPOSE_DGRAD: Traits(dgrad_only=True, side_stream=False, event_wait=False, delayed_producer=False),
    Kind.PLANTED_CROSS_STREAM: Traits(dgrad_only=True, side_stream=True, event_wait=False, delayed_producer=True),
    Kind.EVENT_ORDERED_DGRAD: Traits(dgrad_only=True, side_stream=True, event_wait=True, delayed_producer=False),
    Kind.LINEAR_BACKWARD: Traits(dgrad_only=False, side_stream=False, event_wait=False, delayed_producer=False),
    Kind.TORCH_COMPOSITE: Traits(dgrad_only=False, side_stream=False, event_wait=False, delayed_producer=False,
                                 torch_cast=True),
}


def nvtx_range(name: str) -> contextlib.AbstractContextManager[object]:
    import nvtx

    return nvtx.annotate(name, domain=NVTX_DOMAIN)


@dataclass(frozen=True)
class Sample:
    """Block `block` (a 1-element device tensor) of the size-`size` blocks of a dimension."""

    block: torch.Tensor
    size: int


@dataclass(frozen=True)
class Fp8Pair:
    row: torch.Tensor
    col: torch.Tensor
    scale_inv: torch.Tensor


@dataclass(kw_only=True)
class Layer:
    weight: torch.Tensor  # [out, in] in the input dtype
    x: ScalingState
    w: ScalingState
    go: ScalingState
    main_grad: torch.Tensor  # fp32 [out, in]


class Engine:
    """Runs one workload spec step by step; `detector` collects what every check found."""

    def __init__(self, spec: WorkloadSpec, device: torch.device | None = None, *,
                 checks: frozenset[Check] | None = None, sample: float = 1.0, flush_each_step: bool = True) -> None:
        """checks: the detector checks to compute (default all); sample: fraction of output rows the
        element-wise and GEMM checks compare (a random block per check; campaigns use < 1 for speed);
        flush_each_step: read results back every step (campaigns flush once per batch of trials)."""
        self.spec = spec
        self.traits = TRAITS[spec.kind]
        self.checks = frozenset(Check) if checks is None else checks
        self.sample = sample
        self.flush_each_step = flush_each_step
        self.device = device or torch.device("cuda", torch.cuda.current_device())
        self.uninit_scale = torch.empty(2, device=self.device) if spec.variant is Variant.PLANTED_UNINIT else None
        self.gen = torch.Generator(device=self.device).manual_seed(spec.seed)
        self.dtype = TORCH_DTYPES[spec.in_dtype.value]
        self.detector = Detector()
        cross = self.traits.side_stream or spec.cross_stream_layer >= 0
        self.side = torch.cuda.Stream(self.device) if cross else None
        self.layers = [self._make_layer(i) for i in range(spec.layers)]
        # The weights never change, so their reference amax is computed once, not on every cast.
        self.weight_amax = {id(layer.weight): amax_of(layer.weight) for layer in self.layers}
        self.ref_amax: dict[int, torch.Tensor] = {}
        self.amax_contributions: dict[str, int] = {}

    # ---- setup -------------------------------------------------------------------------------
    def _make_layer(self, index: int) -> Layer:
        s = self.spec
        out_dim = s.out_dim if self.traits.dgrad_only else s.hidden
        weight = (torch.randn(out_dim, s.hidden, device=self.device, generator=self.gen) / s.hidden**0.5).to(self.dtype)
        r = s.recipe
        states = {role: ScalingState(f"layer{index}.{role.value}", r.fp8_format.format_for(role), r, self.device) for role in Role}
        if self.uninit_scale is not None:
            self.uninit_scale[:1].fill_(1.0)
            states[Role.GRAD_OUTPUT].scale = self.uninit_scale  # planted_uninit: scale[1] is never written
        return Layer(weight=weight, x=states[Role.INPUT], w=states[Role.WEIGHT], go=states[Role.GRAD_OUTPUT],
                     main_grad=torch.zeros(out_dim, s.hidden, device=self.device))

    def states(self) -> Iterator[ScalingState]:
        for layer in self.layers:
            yield from (layer.x, layer.w, layer.go)

    # ---- building blocks ---------------------------------------------------------------------
    def cast(self, x: torch.Tensor, state: ScalingState, where: Where, *, count: bool = True,
             check: bool = True) -> Fp8Pair:
        """Cast-transpose x with the state's scale; the amax goes into the state (or a scratch
        buffer when a checkpoint recompute casts the same data again). check=False leaves the
        checks to the caller (`check_cast`), so a consumer can be launched before them."""
        amax = state.amax if count else torch.zeros(1, device=self.device)
        if self.traits.torch_cast:
            fp8 = torch_fp8_dtype(state.fmt)
            row = (x.float() * state.scale[0]).clamp(-state.fmt.max_finite, state.fmt.max_finite).to(fp8)
            col = row.t().contiguous()
            torch.maximum(amax, x.abs().amax().float().reshape(1), out=amax)
            state.scale_inv.copy_(1.0 / state.scale[:1])
        else:
            out = cast_transpose(x, state.scale, state.scale_inv, amax, out_format=state.fmt,
                                 variant=self.spec.variant, config=self.spec.config)
            row, col = out.rowwise, out.columnwise
        if count:
            self.amax_contributions[state.name] = self.amax_contributions.get(state.name, 0) + 1
        if check:
            self._check_cast(x, state, row, col, where)
        return Fp8Pair(row, col, state.scale_inv)

    def rows(self, n: int) -> Sample | None:
        """None (all rows), or a random aligned block of the sampled fraction (at least 16 rows),
        drawn on the device so a captured CUDA graph draws a new block on every replay."""
        if self.sample >= 1.0:
            return None
        size = min(n, max(16, int(n * self.sample)))
        return Sample(torch.randint(0, n // size, (1,), device=self.device, generator=self.gen), size)

    @staticmethod
    def take(t: torch.Tensor, s: Sample | None, dim: int = 0) -> torch.Tensor:
        """The sampled block of t along dim; when the blocks tile the dimension, through a view of
        [blocks, size] so that a column block is read as contiguous runs, not element by element."""
        if s is None:
            return t
        n = t.shape[dim]
        if n % s.size == 0:
            return t.unflatten(dim, (n // s.size, s.size)).index_select(dim, s.block).flatten(dim, dim + 1)
        return t.index_select(dim, s.block * s.size + torch.arange(s.size, device=t.device))

    def _check_cast(self, x: torch.Tensor, state: ScalingState, row: torch.Tensor, col: torch.Tensor, where: Where) -> None:
        key, c = id(state), self.checks
        with nvtx_range(f"{where}/check"):
            if Check.FP8_ROWWISE in c:
                r = self.rows(x.shape[0])
                self.detector.add(Check.FP8_ROWWISE, where,
                                  codes_mismatch(self.take(row, r), torch_cast(self.take(x, r), state.scale[0], state.fmt)))
            if Check.FP8_COLUMNWISE in c:
                r = self.rows(x.shape[1])
                self.detector.add(Check.FP8_COLUMNWISE, where,
                                  codes_mismatch(self.take(col, r), torch_cast(self.take(x, r, 1), state.scale[0], state.fmt).t()))
            if Check.AMAX in c:
                m = self.weight_amax[id(x)] if id(x) in self.weight_amax else amax_of(x)
                self.ref_amax[key] = torch.maximum(self.ref_amax[key], m) if key in self.ref_amax else m
            else:
                self.ref_amax.setdefault(key, x.new_zeros(1, dtype=torch.float32))
            if Check.SCALE_INV in c:
                self.detector.add(Check.SCALE_INV, where, exact_diff(state.scale_inv, 1.0 / state.scale[:1]))

    @staticmethod
    def gemm(a: Fp8Pair, a_rowwise: bool, b: Fp8Pair, b_rowwise: bool) -> torch.Tensor:
        """a @ b.T with both operands as [rows, K] row-major FP8 (cuBLASLt takes b column-major)."""
        x = a.row if a_rowwise else a.col
        y = b.row if b_rowwise else b.col
        return torch._scaled_mm(x, y.t(), scale_a=a.scale_inv, scale_b=b.scale_inv, out_dtype=torch.bfloat16)

    @staticmethod
    def reference_gemm(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor) -> torch.Tensor:
        """FP8 operands widened to bf16, which holds every E4M3/E5M2 value exactly, so the tensor-core
        GEMM (fp32 accumulation) is an exact-operand reference at a fraction of an fp32 GEMM's cost."""
        return (a.to(torch.bfloat16) @ b.to(torch.bfloat16).t()).float() * sa * sb

    def _check_gemm(self, check: Check, out: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                    sa: torch.Tensor, sb: torch.Tensor, where: Where) -> None:
        norm = check is Check.DGRAD and Check.GRAD_NORM in self.checks
        if check not in self.checks and not norm:
            return
        with nvtx_range(f"{where}/check"):
            r = self.rows(out.shape[0])
            ref, got = self.reference_gemm(self.take(a, r), b, sa, sb), self.take(out, r)
            if check in self.checks:
                self.detector.add(check, where, relative_error(got, ref, self.spec.gemm_rel_tol))
            if norm:
                self.detector.add(Check.GRAD_NORM, where, norm_ratio(got, ref, self.spec.grad_norm_ratio))

    # ---- one step ------------------------------------------------------------------------------
    def step(self, s: int) -> None:
        (self._dgrad_step if self.traits.dgrad_only else self._linear_step)(s)
        self._end_step(s)

    def _random(self, rows: int, cols: int) -> torch.Tensor:
        x = torch.randn(rows, cols, device=self.device, generator=self.gen) * self.spec.input_scale
        return x.to(self.dtype)

    def _dgrad_step(self, s: int) -> None:
        layer, where = self.layers[0], Where(s, 0, 0)
        with nvtx_range(f"{where}/cast_weight"):
            w8 = self.cast(layer.weight, layer.w, where)
        dy = self._random(self.spec.tokens, layer.weight.shape[0])
        if self.traits.delayed_producer:
            torch.cuda._sleep(PLANTED_DELAY_CYCLES)
        with nvtx_range(f"{where}/cast_transpose"):
            g8 = self.cast(dy, layer.go, where, check=False)
        main = torch.cuda.current_stream(self.device)
        if self.side is None:
            with nvtx_range(f"{where}/dgrad"):
                dx = self.gemm(g8, True, w8, False)
        else:
            if self.traits.event_wait:
                self.side.wait_stream(main)  # event record on main, wait on side
            with torch.cuda.stream(self.side), nvtx_range(f"{where}/dgrad"):
                dx = self.gemm(g8, True, w8, False)
            main.wait_stream(self.side)
        self._check_cast(dy, layer.go, g8.row, g8.col, where)
        self._check_gemm(Check.DGRAD, dx, g8.row, w8.col, g8.scale_inv, w8.scale_inv, where)

    def _linear_step(self, s: int) -> None:
        for layer in self.layers:
            layer.main_grad.zero_()
        for m in range(self.spec.microbatches):
            saved = self._forward(s, m)
            grad = self._random(self.spec.tokens, self.layers[-1].weight.shape[0])
            for i in reversed(range(len(self.layers))):
                grad = self._backward(s, m, i, grad, saved[i])

    def _forward(self, s: int, m: int) -> list[tuple[torch.Tensor, Fp8Pair | None, Fp8Pair]]:
        """Returns per layer (input, its FP8 pair unless checkpointing, the weight's FP8 pair)."""
        x = self._random(self.spec.tokens, self.spec.hidden)
        saved = []
        for i, layer in enumerate(self.layers):
            where = Where(s, i, m)
            with nvtx_range(f"{where}/fwd_cast_input"):
                x8 = self.cast(x, layer.x, where)
            with nvtx_range(f"{where}/fwd_cast_weight"):
                w8 = self.cast(layer.weight, layer.w, where)
            with nvtx_range(f"{where}/fprop"):
                y = self.gemm(x8, True, w8, True)
            saved.append((x, None if self.spec.checkpointing else x8, w8))
            x = y
        return saved

    def _backward(self, s: int, m: int, i: int, dy: torch.Tensor,
                  saved: tuple[torch.Tensor, Fp8Pair | None, Fp8Pair]) -> torch.Tensor:
        layer, where = self.layers[i], Where(s, i, m)
        x, x8, w8 = saved
        if x8 is None:  # activation checkpointing: recompute the forward, no second amax contribution
            with nvtx_range(f"{where}/recompute"):
                x8 = self.cast(x, layer.x, where, count=False)
                self.gemm(x8, True, w8, True)
        if i == self.spec.cross_stream_layer:
            torch.cuda._sleep(PLANTED_DELAY_CYCLES)
        with nvtx_range(f"{where}/cast_transpose"):
            g8 = self.cast(dy, layer.go, where, check=False)
        if i == self.spec.cross_stream_layer:  # planted: no wait on the cast-transpose
            with torch.cuda.stream(self.side), nvtx_range(f"{where}/dgrad"):
                dx = self.gemm(g8, True, w8, False)
            torch.cuda.current_stream(self.device).wait_stream(self.side)  # type: ignore[arg-type]  # side is set on CUDA
        else:
            with nvtx_range(f"{where}/dgrad"):
                dx = self.gemm(g8, True, w8, False)
        self._check_cast(dy, layer.go, g8.row, g8.col, where)
        with nvtx_range(f"{where}/wgrad"):
            dw = self.gemm(g8, False, x8, False)
            layer.main_grad += dw.float()
        self._check_gemm(Check.DGRAD, dx, g8.row, w8.col, g8.scale_inv, w8.scale_inv, where)
        self._check_gemm(Check.WGRAD, dw, g8.col, x8.col, g8.scale_inv, x8.scale_inv, where)
        return dx

    def _end_step(self, s: int) -> None:
        where = Where(s, -1, -1)
        with nvtx_range(f"step{s}/amax_update"):
            for state in self.states():
                if id(state) in self.ref_amax:
                    if Check.AMAX in self.checks:
                        self.detector.add(Check.AMAX, where, exact_diff(state.amax, self.ref_amax[id(state)]))
                    state.update()
        self.ref_amax.clear()
        if self.flush_each_step:
            self.detector.flush()

    def reseed(self, seed: int) -> None:
        """A fresh, reproducible random stream (campaign trials)."""
        self.gen.manual_seed(seed)

    def update_counts(self) -> dict[str, int]:
        return {st.name: st.updates for st in self.states() if st.updates or st.name in self.amax_contributions}
