"""Issue #26's third round, captured on the H200 (scripts/device_fsdp.sh, the GPU tests' run
directories): FSDP2 with NCCL at world size 1, two gloo ranks sharing one GPU, and the memory
capture window opened by NVTX ranges of every API; judged on CPU. Each shows exactly the hazard
kinds it plants, with every operation judged; a window whose named ranges never opened it is counted
and fails the check, never clean."""
from __future__ import annotations

import json

import pytest

from tests.conftest import DATA
from tracer.analysis.analyze import Analysis, analyze
from tracer.analysis.hazards import Covered
from tracer.cli import main
from tracer.readers.load import load_trace

FIXTURES = DATA / "hazards"
CAPTURES = json.loads((FIXTURES / "captures.json").read_text())
PROGRAMS = ("fsdp_no_wait", "gloo_no_wait_r0", "gloo_no_wait_r1", "gloo_ddp_r0")
KINDS = ("RAW", "WAR", "WAW", "reuse")


def analysed(program: str) -> Analysis:
    return analyze(load_trace(FIXTURES / f"{program}.sqlite"))


@pytest.mark.parametrize("program", PROGRAMS)
def test_each_program_gets_exactly_its_hazards_and_judges_everything(program: str) -> None:
    a = analysed(program)
    h = a.hazards
    assert h is not None and h.memory
    counts = dict(h.counts)
    assert {k: counts[k] for k in KINDS if counts[k]} == CAPTURES[program]["expected"], (program, counts)
    assert h.not_judged == () and counts["may"] == 0, h.not_judged
    assert all(z.producer.range.startswith("planted") for z in h.listed), [z.producer.range for z in h.listed]


def test_fsdp_streams_and_copies_are_judged_and_the_planted_collective_is_the_consumer() -> None:
    """FSDP2's all-gather copies (NCCL at one rank copies on its own stream), its copy-in/copy-out
    memcpys and memsets, and the AdamW step on the DTensor parameters' local shards all carry
    memory sets; the only hazards are the user's all_reduce of a tensor the compute stream wrote."""
    a = analysed("fsdp_no_wait")
    h = a.hazards
    assert h is not None
    cov = {c.kind: c for c in h.coverage}
    assert cov[Covered.KERNEL].judged == cov[Covered.KERNEL].seen > 100, cov[Covered.KERNEL]
    assert cov[Covered.MEMCPY].judged == cov[Covered.MEMCPY].seen > 100 and cov[Covered.MEMSET].judged > 100, cov
    assert cov[Covered.COLLECTIVE].judged == cov[Covered.COLLECTIVE].seen == 2, cov[Covered.COLLECTIVE]
    assert all(z.kind.value == "RAW" and z.consumer.op.startswith("c10d::allreduce") for z in h.listed), h.listed


def test_gloo_collectives_are_host_copies_on_gloos_stream() -> None:
    """gloo on CUDA tensors: no kernel of its own, a device-to-host copy of the tensor on a stream gloo
    makes (ordered after the calling stream by an event), the reduction on the CPU, and a copy back:
    the planted write races the copy out (RAW) and the copy back (WAW)."""
    for rank in ("gloo_no_wait_r0", "gloo_no_wait_r1"):
        h = analysed(rank).hazards
        assert h is not None
        pairs = {(z.kind.value, z.consumer.kernel) for z in h.listed}
        assert pairs == {("RAW", "[memcpy DtoH]"), ("WAW", "[memcpy HtoD]")}, (rank, pairs)


def test_ranges_of_every_nvtx_api_open_the_window() -> None:
    a = analysed("nvtx_apis_window")
    h = a.hazards
    assert h is not None and dict(h.counts)["RAW"] == 6
    assert {z.producer.range for z in h.listed} == {"win_domain_push", "win_domain_start", "win_c_push", "win_c_start",
                                                     "win_c_domain", "win_c_registered"}
    (out,) = [c for c in h.coverage if c.kind is Covered.OUTSIDE_WINDOW]
    assert out.missed == 0 and out.unjudged > 0  # the race in `other`: outside the window, not judged


def test_named_ranges_that_never_opened_the_window_fail_closed(capsys: pytest.CaptureFixture[str]) -> None:
    """Captured when the C ranges could not be read (cupti-python's subscriber hands NVTX callbacks no
    data): 4 ranges matching 'win*' are in the trace but no window interval covers them."""
    a = analysed("nvtx_c_unread")
    h = a.hazards
    assert h is not None and dict(h.counts)["RAW"] == 2
    (out,) = [c for c in h.coverage if c.kind is Covered.OUTSIDE_WINDOW]
    assert out.missed == 4 and out.to_json()["missed_ranges"] == 4
    assert any("4 NVTX range(s) the window names never opened it" in c.line() for c in h.not_judged)
    assert main(["trace", "analyze", "--fail-on-hazard", str(FIXTURES / "nvtx_c_unread.sqlite")]) != 0
    assert "never opened it" in capsys.readouterr().out
