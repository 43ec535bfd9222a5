"""SASS of the compiled kernels and the per-variant summary: registers, instruction count (NOP
padding left out), fence and atomic instructions with their scope."""
from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tracer.kernel import compile as nvrtc_compile
from tracer import proc
from tracer.errors import ToolMissingError
from tracer.kernel.spec import KernelKey

FENCE_OPS = ("MEMBAR", "FENCE", "ERRBAR", "CGAERRBAR", "CCTL")
ATOMIC_OPS = ("ATOMG", "ATOMS", "ATOM", "REDG", "RED")
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_SCOPE = re.compile(r"\.(CTA|SM|GPU|SYS|VC)\b")
_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def find_tool(name: str) -> str:
    """nvdisasm / cuobjdump: NVIDIA's pip wheels first, then a CUDA toolkit on PATH."""
    import shutil

    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        found = find_nvidia_binary_utility(name)
    except ImportError:
        found = None
    found = found or shutil.which(name)
    if not found:
        raise ToolMissingError(f"{name} not found: pip install nvidia-cuda-{name} (or install a CUDA toolkit)")
    return found


@dataclass(frozen=True)
class SpecialInstr:
    offset: int
    opcode: str
    scope: str  # CTA, GPU, SYS, or "" when the opcode names none


@dataclass(frozen=True, kw_only=True)
class SassSummary:
    registers: int
    shared_bytes: int
    stack_bytes: int
    instructions: int
    fences: tuple[SpecialInstr, ...]
    atomics: tuple[SpecialInstr, ...]

    def order(self) -> str:
        """Fences and atomics in program order, e.g. 'MEMBAR.SC.GPU < ATOMG.E.MAX.S32.STRONG.GPU'."""
        items = sorted(self.fences + self.atomics, key=lambda s: s.offset)
        return " < ".join(s.opcode for s in items) or "-"


@contextmanager
def _cubin_file(key: KernelKey) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="tracer-sass-") as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(nvrtc_compile.cubin(key))
        yield path


def _tool_output(tool: str, args: list[str], key: KernelKey) -> str:
    with _cubin_file(key) as path:
        res = proc.capture([find_tool(tool), *args, str(path)])
    if res.returncode != 0:
        raise ToolMissingError(f"{tool} failed (exit {res.returncode}): {res.stderr.strip()[:300]}")
    return res.stdout


def sass(key: KernelKey) -> str:
    return _tool_output("nvdisasm", ["-c"], key)


def resource_usage(key: KernelKey) -> str:
    return _tool_output("cuobjdump", ["--dump-resource-usage"], key)


def opcodes(sass_text: str) -> list[tuple[int, str]]:
    """(offset, full opcode with modifiers) of every instruction but NOP: the assembler pads the
    code to an alignment with NOPs, so their number changes when the real code does not (four
    added fences once read "1296 vs 1296 instructions")."""
    out = []
    for line in sass_text.splitlines():
        m = _INSTR.search(line)
        if m and m.group(1) != "NOP":
            out.append((int(line.split("/*")[1].split("*/")[0], 16), m.group(1)))
    return out


def _special(ops: list[tuple[int, str]], names: tuple[str, ...]) -> tuple[SpecialInstr, ...]:
    found = []
    for off, op in ops:
        if op.split(".")[0] in names:
            scope = _SCOPE.search(op)
            found.append(SpecialInstr(off, op, scope.group(1) if scope else ""))
    return tuple(found)


def summarize(sass_text: str, resources: str) -> SassSummary:
    ops = opcodes(sass_text)
    m = _RES.search(resources)
    reg, stack, shared, _ = (int(g) for g in m.groups()) if m else (0, 0, 0, 0)
    return SassSummary(registers=reg, shared_bytes=shared, stack_bytes=stack, instructions=len(ops), fences=_special(ops, FENCE_OPS),
                       atomics=_special(ops, ATOMIC_OPS))


def opcode_diff(a: str, b: str, name_a: str, name_b: str, context: int = 3) -> str:
    """Unified diff of the opcode streams (registers and addresses dropped, so only codegen shows)."""
    ops_a = [op for _, op in opcodes(a)]
    ops_b = [op for _, op in opcodes(b)]
    return "\n".join(difflib.unified_diff(ops_a, ops_b, name_a, name_b, n=context, lineterm=""))
