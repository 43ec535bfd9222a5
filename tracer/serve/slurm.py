"""Jobs of `tracer serve` sent to Slurm through submitit (the executor campaigns use): the same
argv a local job runs, its output into the same log the server tails, its exit code written
beside the log; state from `scontrol show job` (tracer.campaign.slurm), cancel by `scancel`. The
server's state folder must be on a file system the Slurm nodes share."""
from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tracer import proc
from tracer.errors import ToolMissingError
from tracer.serve.config import SlurmConfig

RUNNING = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT")


def available() -> str | None:
    """None when jobs can go to Slurm from here, else why not."""
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None or shutil.which("scancel") is None:
        return "no Slurm client (sbatch, scontrol, scancel) on this machine"
    try:
        import submitit  # noqa: F401  # only whether it imports
    except ImportError:
        return "submitit is not installed (pip install 'tracer-nsight[slurm]')"
    return None


def submit(argv: Sequence[str], log: Path, folder: Path, cfg: SlurmConfig, gpu: bool, name: str) -> str:
    """sbatch one task running `argv`; its Slurm job id."""
    why = available()
    if why is not None:
        raise ToolMissingError(f"this job's entry runs on Slurm, but {why}")
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    params: dict[str, object] = {"timeout_min": cfg.time_min, "name": name}
    if cfg.partition:
        params["slurm_partition"] = cfg.partition
    if gpu and cfg.gpus_per_task:
        params["slurm_gpus_per_task"] = cfg.gpus_per_task
    executor.update_parameters(**params)
    return str(executor.submit(run_logged, list(argv), str(log)).job_id)


def exit_file(log: Path) -> Path:
    return log.with_name(log.name + ".exit")


def run_logged(argv: list[str], log: str) -> int:
    """On the Slurm node: run argv with its output appended to the server's log, then write its
    exit code beside the log. The child stays in this task's process group, so `scancel`
    (proctrack signals the group) stops it too; tracer/proc.py would put it in a session of its own."""
    with open(log, "ab") as fh:
        code = subprocess.call(argv, stdout=fh, stderr=subprocess.STDOUT)
    out = exit_file(Path(log))
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(str(code))
    tmp.replace(out)
    return code


def state(job_id: str) -> tuple[str, str]:
    """(JobState, ExitCode) as `scontrol show job` says, ("UNKNOWN", "") once it forgot the job."""
    from tracer.campaign.slurm import scontrol_state

    return scontrol_state(job_id)


def cancel(job_id: str) -> None:
    proc.capture(["scancel", job_id], timeout=30)
