"""DelayedScaling state as the FP8 training recipe keeps it: an amax history per tensor, a scale
computed from it after each step, and a count of updates so "exactly once per step" can be checked.

`ScalingState` keeps its tensors on the device so an update costs no host synchronisation:
scale = fp8_max / amax / 2^margin, where amax is the history's max (or its most recent entry); a
zero, inf or NaN amax keeps the previous scale.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from tracer.errors import UsageError
from tracer.kernel.spec import OutFormat

if TYPE_CHECKING:
    import torch


class AmaxAlgo(str, Enum):
    MAX = "max"
    MOST_RECENT = "most_recent"


class Fp8Recipe(str, Enum):
    """HYBRID: E4M3 forward (activations, weights), E5M2 backward (gradients)."""

    HYBRID = "hybrid"
    E4M3 = "e4m3"
    E5M2 = "e5m2"

    def format_for(self, role: Role) -> OutFormat:
        if self is Fp8Recipe.HYBRID:
            return OutFormat.E5M2 if role is Role.GRAD_OUTPUT else OutFormat.E4M3
        return OutFormat(self.value)


class Role(str, Enum):
    INPUT = "input"
    WEIGHT = "weight"
    GRAD_OUTPUT = "grad_output"


@dataclass(frozen=True)
class RecipeConfig:
    fp8_format: Fp8Recipe = Fp8Recipe.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: AmaxAlgo = AmaxAlgo.MAX
    margin: int = 0

    def __post_init__(self) -> None:
        if self.amax_history_len < 1:
            raise UsageError(f"amax_history_len={self.amax_history_len} must be >= 1")
        if self.margin < 0:
            raise UsageError(f"margin={self.margin} must be >= 0")


class ScalingState:
    """One tensor's FP8 meta on the device: amax (accumulated by the kernels during a step),
    history, scale (slot 1 is spare and never written), scale_inv."""

    def __init__(self, name: str, fmt: OutFormat, recipe: RecipeConfig, device: torch.device) -> None:
        import torch

        self.name, self.fmt, self.recipe = name, fmt, recipe
        self.amax = torch.zeros(1, device=device)
        self.history = torch.zeros(recipe.amax_history_len, device=device)
        self.scale = torch.empty(2, device=device)
        self.scale[:1].fill_(1.0)
        self.scale_inv = torch.ones(1, device=device)
        self.updates = 0

    def update(self) -> None:
        """End of step: push amax into the history, recompute the scale, reset amax."""
        import torch

        self.history.copy_(torch.roll(self.history, 1))  # in place: a captured CUDA graph keeps its buffers
        self.history[:1].copy_(self.amax)
        ref = self.history[:1] if self.recipe.amax_compute_algo is AmaxAlgo.MOST_RECENT else self.history.amax(0, keepdim=True)
        new = self.fmt.max_finite / ref / (2.0**self.recipe.margin)
        ok = torch.isfinite(ref) & (ref > 0) & torch.isfinite(new)
        self.scale[:1].copy_(torch.where(ok, new, self.scale[:1]))
        self.amax.zero_()
        self.updates += 1
