"""What `tracer kernels` prints: the variant list with what each fence does, the configs, and a
SASS summary (registers, fences, atomics and their scopes)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tracer.kernel.spec import BLOCKS_PER_SM, PREFERRED_PATCHES, VARIANT_DOC, InDtype, Variant, all_configs

if TYPE_CHECKING:
    from tracer.kernel.disasm import SassSummary


def variant_names() -> str:
    return ", ".join(v.value for v in Variant)


def format_list(dtype: InDtype) -> str:
    lines = ["Variants (fence placement around the amax atomic; planted_* carry one deliberate bug):"]
    lines += [f"  {v.value:<22} {VARIANT_DOC[v]}" for v in Variant]
    lines.append(f"\nConfigs for {dtype.value} input (LOAD/STORE bytes -> block tile rows x cols), widest first:")
    for cfg in all_configs(dtype):
        tm, tn = cfg.tile(dtype)
        lines.append(f"  {str(cfg):<6} tile {tm}x{tn}")
    lines += ["\nEach thread loads STORE rows x LOAD bytes, writes the rows' FP8 from registers and the columns'",
              "STORE-byte vectors through shared memory. Heuristic: the first fitting config of the preferred",
              "patches (elements per row x rows: " + ", ".join(f"{e}x{r}" for e, r in PREFERRED_PATCHES) + ") that gives",
              f"every SM a tile and does not leave a short second round (more than {BLOCKS_PER_SM} x SMs tiles, at most",
              "twice that); else the one with the most tiles (see `tracer kernels config`)."]
    return "\n".join(lines)


def format_summary(name: str, s: SassSummary) -> str:
    fences = ", ".join(f"{f.opcode}@{f.offset:#x}" for f in s.fences) or "none"
    atomics = ", ".join(f"{a.opcode}@{a.offset:#x} (scope {a.scope or '?'})" for a in s.atomics) or "none"
    return (
        f"== {name}\n  registers {s.registers}, shared {s.shared_bytes} B, stack {s.stack_bytes} B, "
        f"{s.instructions} instructions\n  fences: {fences}\n  atomics: {atomics}\n  order: {s.order()}"
    )


def changed_lines(diff: str) -> int:
    """Lines added or removed in a unified diff (headers not counted)."""
    return sum(1 for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))
