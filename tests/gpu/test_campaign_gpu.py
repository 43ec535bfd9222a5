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
