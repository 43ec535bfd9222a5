"""NVRTC compiles every variant x config for sm_90 and sm_120 without a GPU, and the PTX of each
fence variant has the fence and atomic scope it promises, where it promises."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tracer.kernel import compile as nvrtc_compile
from tracer.kernel.spec import FENCE_VARIANTS, Config, InDtype, KernelKey, OutFormat, Variant, all_configs

ARCHS = ("sm_90", "sm_120")
FENCE = re.compile(r"^\s*(membar\.(cta|gl|sys)|fence\.\S+)")
ATOM = re.compile(r"^\s*(atom|red)\.\S*global\S*\.max\.s32")
LABEL = re.compile(r"^\$L__\w+:")


@pytest.mark.parametrize("arch", ARCHS)
def test_every_variant_and_config_compiles(arch: str) -> None:
    keys = [KernelKey(variant=v, config=c, in_dtype=InDtype.BF16, out_format=OutFormat.E4M3,
                      arch=arch) for v in Variant for c in all_configs(InDtype.BF16)]
    keys += [KernelKey(variant=Variant.NONE, config=c, in_dtype=d, out_format=f, arch=arch)
             for d in (InDtype.FP16, InDtype.FP32) for f in OutFormat for c in all_configs(d)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        ptxs = list(pool.map(nvrtc_compile.ptx, keys))
    assert len(ptxs) == 12 * 20 + 2 * (20 + 15)
    for key, text in zip(keys, ptxs):
        assert ".entry cast_transpose(" in text, nvrtc_compile.describe(key)
        assert f".target {key.arch}" in text


def _events(key: KernelKey) -> list[tuple[str, str]]:
    """('fence'|'atom'|'label', text) in PTX order, from the amax reduction on."""
    out = []
    for line in nvrtc_compile.ptx(key).splitlines():
        if FENCE.match(line):
            out.append(("fence", line.strip()))
        elif ATOM.match(line):
            out.append(("atom", line.strip()))
        elif LABEL.match(line):
            out.append(("label", line.strip()))
    return out


def _kinds(events: list[tuple[str, str]]) -> list[str]:
    return [k for k, _ in events if k != "label"]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("variant", FENCE_VARIANTS)
def test_fence_placement_in_ptx(variant: Variant, arch: str) -> None:
    ev = _events(KernelKey(variant=variant, config=Config(16, 16), in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch=arch))
    fences = [t for k, t in ev if k == "fence"]
    atoms = [t for k, t in ev if k == "atom"]
    assert len(atoms) == 1, atoms
    atom = atoms[0]
    expect = {
        Variant.NONE: ([], "atom"),
        Variant.SYSTEM_SCOPE_ATOMIC: ([], "atom"),
        Variant.DEVICE_BEFORE_ATOMIC: (["membar.gl"], "fence<atom"),
        Variant.DEVICE_THREAD0_ONLY: (["membar.gl"], "fence<atom"),
        Variant.BLOCK_BEFORE_ATOMIC: (["membar.cta"], "fence<atom"),
        Variant.SYSTEM_BEFORE_ATOMIC: (["membar.sys"], "fence<atom"),
        Variant.DEVICE_AFTER_ATOMIC: (["membar.gl"], "atom<fence"),
        Variant.DEVICE_BEFORE_RETURN: (["membar.gl"], "atom<fence"),
    }[variant]
    assert [f.split()[0].rstrip(";") for f in fences] == expect[0]
    order = "<".join(_kinds(ev)).replace("fence<fence", "fence")
    assert order == expect[1]
    if variant is Variant.SYSTEM_SCOPE_ATOMIC:
        assert ".sys" in atom
    else:
        assert ".sys" not in atom and (".gpu" in atom or arch == "sm_90"), atom


@pytest.mark.parametrize("arch", ARCHS)
def test_after_atomic_is_in_the_atomic_block_and_before_return_is_not(arch: str) -> None:
    def labels_between(variant: Variant) -> int:
        ev = _events(KernelKey(variant=variant, config=Config(16, 16), in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch=arch))
        i = next(n for n, (k, _) in enumerate(ev) if k == "atom")
        j = next(n for n, (k, _) in enumerate(ev) if k == "fence")
        return sum(1 for k, _ in ev[i:j] if k == "label")

    assert labels_between(Variant.DEVICE_AFTER_ATOMIC) == 0
    assert labels_between(Variant.DEVICE_BEFORE_RETURN) >= 1


@pytest.mark.parametrize("variant,needle", [
    (Variant.PLANTED_RACE, None),
    (Variant.PLANTED_BARRIER, "bar.warp.sync"),
    (Variant.PLANTED_OOB, "1099511627776"),
])
def test_planted_kernels_carry_their_defect(variant: Variant, needle: str | None) -> None:
    key = KernelKey(variant=variant, config=Config(16, 16), in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch="sm_90")
    text = nvrtc_compile.ptx(key)
    clean = nvrtc_compile.ptx(KernelKey(variant=Variant.NONE, config=Config(16, 16), in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch="sm_90"))
    if needle is None:  # one barrier fewer than the clean kernel
        assert text.count("bar.sync") == clean.count("bar.sync") - 1
    else:
        assert needle in text and needle not in clean


def test_compile_error_carries_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracer.errors import CompileError

    monkeypatch.setattr(nvrtc_compile, "kernel_source", lambda: "extern \"C\" __global__ void k() { nope; }")
    key = KernelKey(variant=Variant.NONE, config=Config(4, 4), in_dtype=InDtype.FP32, out_format=OutFormat.E4M3, arch="sm_90")
    nvrtc_compile.ptx.cache_clear()
    with pytest.raises(CompileError, match="identifier \"nope\" is undefined"):
        nvrtc_compile.ptx(key)
    nvrtc_compile.ptx.cache_clear()


AB_EDITS = sorted((Path(__file__).resolve().parent.parent / "scripts" / "ab").glob("*.yaml"))


@pytest.mark.parametrize("path", AB_EDITS, ids=lambda p: p.stem)
def test_ab_edits_apply_to_the_kernel_and_compile(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    edited = nvrtc_compile.apply_edits(nvrtc_compile.kernel_source(), doc["edits"], str(path))
    assert edited != nvrtc_compile.kernel_source() and doc["what"]
    key = KernelKey(variant=Variant.DEVICE_BEFORE_ATOMIC, config=Config(8, 16), in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch="sm_90")
    assert len(nvrtc_compile.source_cubin(edited, key, path.name)) > 1000


def test_acq_rel_edit_changes_the_fence_it_names() -> None:
    doc = yaml.safe_load((AB_EDITS[0].parent / "acq_rel_fence.yaml").read_text())
    edited = nvrtc_compile.apply_edits(nvrtc_compile.kernel_source(), doc["edits"], "acq_rel_fence")
    assert 'fence.acq_rel.gpu' in edited and 'fence.acq_rel.sys' in edited
    assert "__threadfence_system()" not in edited


def test_apply_edits_names_a_missing_or_repeated_text() -> None:
    from tracer.errors import UsageError

    src = "a b a"
    assert nvrtc_compile.apply_edits(src, [{"old": "b", "new": "c"}], "e") == "a c a"
    with pytest.raises(UsageError, match=r"e: edit 1's old text occurs 2 times"):
        nvrtc_compile.apply_edits(src, [{"old": "a", "new": "c"}], "e")
    with pytest.raises(UsageError, match=r"e: edit 2's old text occurs 0 times"):
        nvrtc_compile.apply_edits(src, [{"old": "b", "new": "c"}, {"old": "zz", "new": ""}], "e")
    with pytest.raises(UsageError, match="exactly the keys old and new"):
        nvrtc_compile.apply_edits(src, [{"old": "b"}], "e")


@pytest.mark.parametrize("dtype", list(InDtype))
def test_blocks_per_sm_matches_the_widest_preferred_patch(dtype: InDtype) -> None:
    """The heuristic's BLOCKS_PER_SM is what the registers of the 4x16 patch allow on sm_90."""
    from tracer.kernel import disasm
    from tracer.kernel.spec import BLOCKS_PER_SM, PREFERRED_PATCHES, THREADS

    elems, rows = PREFERRED_PATCHES[0]
    cfg = Config(elems * dtype.nbytes, rows)
    key = KernelKey(variant=Variant.NONE, config=cfg, in_dtype=dtype, out_format=OutFormat.E4M3, arch="sm_90")
    regs = disasm.summarize(disasm.sass(key), disasm.resource_usage(key)).registers
    assert 65536 // (-(-regs // 8) * 8 * THREADS) == BLOCKS_PER_SM, (cfg, regs)


def test_sass_instruction_count_leaves_out_nop_padding() -> None:
    """Real SASS from nvdisasm: the assembler pads with NOPs, and a variant that adds four fence
    instructions must count more instructions than `none`, not the same padded total."""
    from tracer.kernel import disasm

    keys = [KernelKey(variant=v, config=Config(16, 16), in_dtype=InDtype.BF16, out_format=OutFormat.E4M3, arch="sm_90")
            for v in (Variant.NONE, Variant.DEVICE_BEFORE_ATOMIC)]
    texts = [disasm.sass(k) for k in keys]
    lines = [[line for line in t.splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/\s+\S", line)] for t in texts]
    nops = [sum(1 for line in ls if re.search(r"\*/\s+NOP\s*;", line)) for ls in lines]
    assert all(n > 0 for n in nops), "the SASS is expected to end in NOP padding"
    base, fenced = (disasm.summarize(t, "") for t in texts)
    assert base.instructions == len(lines[0]) - nops[0]
    assert fenced.instructions == len(lines[1]) - nops[1]
    assert len(fenced.fences) == 4 and not base.fences
    assert fenced.instructions - base.instructions == len(fenced.fences)
    assert "NOP" not in disasm.opcode_diff(texts[0], texts[1], "none", "device_before_atomic")
