"""Slurm executor: a submitit job array, one task per group of chunks; results come back as the
tasks' pickled return values and are merged into the store (INSERT OR IGNORE: idempotent). A task
killed hard is seen through `scontrol show job` too, since without accounting submitit cannot tell."""
from __future__ import annotations

import pickle
import re
import shutil
import time
from pathlib import Path
from typing import Any

from tracer import proc
from tracer.campaign.chunks import Chunk, plan_chunks
from tracer.campaign.grid import CampaignSpec, load_campaign
from tracer.campaign.trials_db import Store, TrialRow
from tracer.errors import ToolMissingError

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def slurm_task(profile: str, chunks: list[tuple[int, list[int], dict[str, Any]]]) -> list[TrialRow]:
    """Runs on a Slurm node: the chunks' trials, returned (the store is written by the submitter)."""
    import os

    from tracer.campaign.grid import Cell
    from tracer.campaign.trials import run_chunk

    spec = load_campaign(profile)
    name = f"slurm:{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{os.environ.get('SLURM_ARRAY_TASK_ID', '?')}"
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "cpu")
    rows: list[TrialRow] = []
    for cell_id, trials, cell in chunks:
        rows += run_chunk(spec, cell_id, Cell(**cell), trials, gpu, name)
    return rows


def scontrol_state(job_id: str) -> tuple[str, str]:
    """(JobState, ExitCode) from `scontrol show job`, ("UNKNOWN", "") when it has forgotten the job."""
    res = proc.capture(["scontrol", "show", "job", job_id], timeout=30)
    state = re.search(r"JobState=(\S+)", res.stdout)
    code = re.search(r"ExitCode=(\S+)", res.stdout)
    return (state.group(1) if state else "UNKNOWN", code.group(1) if code else "")


def run_slurm(store: Store, spec: CampaignSpec, profile_arg: str, folder: Path, *, partition: str | None = None,
              time_min: int | None = None, gpus_per_task: int | None = None, tasks: int | None = None,
              poll_s: float = 2.0) -> list[str]:
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        raise ToolMissingError("sbatch/scontrol not found: --executor slurm needs a Slurm client on this machine")
    import submitit

    ex_cfg = spec.executor
    n_tasks = tasks or ex_cfg.tasks
    chunks = plan_chunks(store, spec)
    groups = [chunks[i::n_tasks] for i in range(n_tasks)]
    groups = [g for g in groups if g]
    cells = {c.cell_id: c.cell for c in store.cells()}
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    params: dict[str, Any] = {"timeout_min": time_min or ex_cfg.time_min, "slurm_array_parallelism": len(groups) or 1}
    if partition or ex_cfg.partition:
        params["slurm_partition"] = partition or ex_cfg.partition
    gpt = ex_cfg.gpus_per_task if gpus_per_task is None else gpus_per_task
    if gpt and all(c.workload != "cpu_reference" for c in cells.values()):
        params["slurm_gpus_per_task"] = gpt
    executor.update_parameters(**params)
    payload = [[(c, t, cells[c].__dict__) for c, t in g] for g in groups]
    jobs = executor.map_array(slurm_task, [profile_arg] * len(payload), payload)
    return _collect(store, jobs, groups, poll_s)


def _collect(store: Store, jobs: list[Any], groups: list[list[Chunk]], poll_s: float) -> list[str]:
    events: list[str] = []
    pending = dict(zip((j.job_id for j in jobs), zip(jobs, groups)))
    while pending:
        time.sleep(poll_s)
        for job_id, (job, group) in list(pending.items()):
            state, code = scontrol_state(job_id)
            result = Path(job.paths.result_pickle)
            if state not in FINAL and not (state == "UNKNOWN" and result.is_file()):
                continue
            del pending[job_id]
            outcome = _read_result(result)
            if state == "COMPLETED" or (state == "UNKNOWN" and outcome is not None):
                if outcome is not None and outcome[0] == "success":
                    store.add_trials(outcome[1])
                    continue
            detail = f"slurm task {job_id}: scontrol JobState={state} ExitCode={code}; submitit state {job.state}"
            events.append(detail)
            for cell_id, trials in group:
                missing = sorted(set(trials) - store.done_trials(cell_id))
                if missing:
                    store.record_crash(cell_id, missing, f"slurm:{job_id}", "?", _exit(code), detail)
    return events


def _read_result(path: Path):  # type: ignore[no-untyped-def]  # whatever the task pickled: the caller checks it
    if not path.is_file():
        return None
    with open(path, "rb") as fh:
        return pickle.load(fh)


def _exit(code: str) -> int | None:
    try:
        return int(code.split(":")[0])
    except (ValueError, IndexError):
        return None
