"""On GPUs: the fence ablation campaign; the planted race fails at a measurable rate, the fence
variants report 0/N with their upper bounds; with two GPUs the local executor uses both."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = Path(os.environ.get("TRACER_RESULTS", "/tmp"))


def test_fence_ablation_campaign(tmp_path: Path) -> None:
    import torch

    data = yaml.safe_load((ROOT / "profiles" / "campaigns" / "fence_ablation.yaml").read_text())
    data["trials_per_cell"] = int(os.environ.get("TRACER_CAMPAIGN_TRIALS", "100"))
    profile = tmp_path / "fence.yaml"
    profile.write_text(yaml.safe_dump(data))
    store = tmp_path / "fence.sqlite"
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "tracer", "campaign", "run", str(profile), "-o", str(store), "--no-progress"],
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    seconds = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(subprocess.run([sys.executable, "-m", "tracer", "campaign", "report", str(store), "--json"],
                                       capture_output=True, text=True, cwd=ROOT, check=True).stdout)
    trials = sum(c["trials"] for c in report["cells"])
    summary = {"seconds": seconds, "trials": trials, "trials_per_s": trials / seconds, "gpus": torch.cuda.device_count(),
               "report": report, "text": res.stdout}
    (RESULTS / "campaign_gpu.json").write_text(json.dumps(summary, indent=1, default=str))
    (RESULTS / "campaign_demo.json").write_text(json.dumps({
        "source": f"tracer campaign run fence_ablation ({data['trials_per_cell']} trials per cell) on "
                  f"{torch.cuda.device_count()} x {torch.cuda.get_device_name()}",
        "variants": {c["cell"]: {"trials": c["trials"], "failures": c["failures"]} for c in report["cells"]}}, indent=1))
    cells = {c["cell"]: c for c in report["cells"]}
    planted = cells.pop("planted_cross_stream")
    assert planted["failures"] > 0 and planted["ci95"][0] > 0
    for name, c in cells.items():
        assert c["failures"] == 0 and c["one_sided"], (name, c)
        assert c["ci95"][1] == pytest.approx(1 - 0.05 ** (1 / c["trials"]))
    if torch.cuda.device_count() >= 2:
        used = {g for c in report["cells"] for g in c["gpus"].split(",")}
        assert used == {"0", "1"}, used
    print(res.stdout)


def _graph(variant: str, checks: frozenset | None = None):
    from tracer.campaign.graphed import TrialGraph
    from tracer.fp8.detector import Check
    from tracer.kernel.spec import parse_variant
    from tracer.workloads.engine import Engine
    from tracer.workloads.spec import load_workload

    spec = load_workload("cast_transpose_dgrad").with_overrides(variant=parse_variant(variant), tokens=1024, hidden=1024,
                                                                out_features=1024, steps=2)
    engine = Engine(spec, checks=frozenset(Check) - {Check.UPDATE_COUNT} if checks is None else checks,
                    sample=0.0625, flush_each_step=False)
    return TrialGraph(engine, steps=2)


def test_graphed_trials_draw_fresh_data_and_pass_when_clean() -> None:
    graph = _graph("none")
    rows = graph.run(list(range(20)))
    assert len(rows) == 20 and len(rows[0]) == len(graph.layout) > 0
    assert not any(failed for trial in rows for failed, _ in trial)
    dgrad = [i for i, (check, _, _) in enumerate(graph.layout) if check.value == "dgrad"]
    errors = {trial[i][1] for trial in rows for i in dgrad}
    assert len(errors) > 10 and all(0 < e < 0.02 for e in errors)  # new inputs and sampled rows per replay


def test_graphed_trials_catch_the_planted_shared_memory_race() -> None:
    graph = _graph("planted_race")
    rows = graph.run(list(range(20)))
    failed = {graph.layout[i][0].value for trial in rows for i, (bad, _) in enumerate(trial) if bad}
    (RESULTS / "graph_planted_race.txt").write_text(f"{sum(any(b for b, _ in t) for t in rows)}/20 trials failed: {failed}\n")
    assert "fp8_columnwise" in failed
