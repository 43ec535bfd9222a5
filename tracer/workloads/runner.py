"""Run a workload spec on the GPU and turn the detector's findings into a report."""
from __future__ import annotations

import time
from dataclasses import dataclass

from tracer.fp8.detector import Check, CheckVerdict, Where, summarize
from tracer.errors import TargetFailed, UsageError, unknown
from tracer.schemas import header
from tracer.workloads.spec import Kind, WorkloadSpec


class WorkloadFailed(TargetFailed):
    """The workload itself failed on the GPU (a kernel fault, a CUDA error)."""


@dataclass(frozen=True, kw_only=True)
class RunReport:
    spec: WorkloadSpec
    verdicts: tuple[CheckVerdict, ...]
    update_counts: dict[str, int]
    amax_contributions: dict[str, int]
    seconds: float
    device: str
    config: str
    failed_steps: tuple[int, ...]

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    def to_json(self) -> dict[str, object]:
        s = self.spec
        return {
            **header("workload-run"),  # schema 2: the workload's kind moved from `kind` to `workload_kind`
            "workload": s.name, "workload_kind": s.kind.value, "variant": s.variant.value, "config": self.config,
            "shape": {"tokens": s.tokens, "hidden": s.hidden, "out_features": s.out_dim},
            "layers": s.layers, "microbatches": s.microbatches, "checkpointing": s.checkpointing,
            "steps": s.steps, "seed": s.seed, "device": self.device, "seconds": round(self.seconds, 3),
            "passed": self.passed, "failed_steps": list(self.failed_steps), "checks": [v.to_json() for v in self.verdicts],
            "update_counts": self.update_counts, "amax_contributions": self.amax_contributions,
        }


def run_workload(spec: WorkloadSpec, device: str = "cuda") -> RunReport:
    """Run every step; device "cpu" is allowed for torch_composite, which launches no tracer kernel."""
    import torch

    from tracer.kernel.launch import require_gpu
    from tracer.workloads.engine import Engine

    if device == "cpu":
        if spec.kind is not Kind.TORCH_COMPOSITE:
            raise UsageError(f"--device cpu runs only torch_composite workloads, not {spec.kind.value}")
    elif device == "cuda":
        require_gpu()
    else:
        raise unknown("device", device, ("cuda", "cpu"))
    start = time.perf_counter()
    try:
        engine = Engine(spec, torch.device(device) if device == "cpu" else None)
        for s in range(spec.steps):
            engine.step(s)
        if device == "cuda":
            torch.cuda.synchronize()
    except RuntimeError as exc:  # torch.AcceleratorError is a RuntimeError
        if "cuda" not in str(exc).lower():
            raise
        raise WorkloadFailed(f"workload {spec.name} failed on the GPU: {str(exc).splitlines()[0]}") from exc
    results = list(engine.detector.results)
    counts = engine.update_counts()
    worst = max((abs(n - spec.steps) for n in counts.values()), default=0)
    results.append((Check.UPDATE_COUNT, Where(spec.steps - 1, -1, -1), worst != 0, float(worst)))
    cfg = str(spec.config) if spec.config else "auto"
    failed = tuple(sorted({w.step for _, w, bad, _ in results if bad}))
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    return RunReport(spec=spec, verdicts=tuple(summarize(results)), update_counts=counts, amax_contributions=dict(engine.amax_contributions),
                     seconds=time.perf_counter() - start, device=name, config=cfg, failed_steps=failed)


def format_report(r: RunReport) -> str:
    s = r.spec
    lines = [
        f"{s.name} ({s.kind.value}) variant={s.variant.value} config={r.config} tokens={s.tokens} hidden={s.hidden}"
        f" out={s.out_dim} layers={s.layers} microbatches={s.microbatches} checkpointing={s.checkpointing}"
        f" steps={s.steps} seed={s.seed} on {r.device} in {r.seconds:.1f} s",
        f"{'check':<16} {'verdict':<7} {'worst':>12} {'failed':>12}  first failure",
    ]
    for v in r.verdicts:
        lines.append(f"{v.check.value:<16} {'pass' if v.passed else 'FAIL':<7} {v.worst:>12.4g} "
                     f"{f'{v.failures}/{v.comparisons}':>12}  {v.first_failure or '-'}")
    lines.append(f"updates per tensor over {s.steps} steps: " + ", ".join(f"{k}={n}" for k, n in sorted(r.update_counts.items())))
    lines.append("verdict: " + ("PASS" if r.passed else f"FAIL ({len(r.failed_steps)} of {s.steps} steps with a failed check)"))
    return "\n".join(lines)
