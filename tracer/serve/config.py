"""What `tracer serve` may run, from the server's own configuration only: the allow-list of job
actions, workload and campaign profiles and named commands (a YAML file, `--jobs FILE`), and the
argv each job request becomes (one pure function). A request names an entry of the allow-list; it
never carries a command, a path or a flag of its own.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from tracer.errors import TracerError, UsageError, unknown

SHAPE = re.compile(r"^[1-9][0-9]{0,5}(x[1-9][0-9]{0,5}){1,2}$")
MAX_STEPS = 1000
DEFAULT_TIMEOUT_S = 3600.0
FIELDS = ("action", "target", "device", "shape", "steps", "gpu", "memory")


class Action(str, Enum):
    RUN = "run"  # tracer run WORKLOAD (the detector; --device cpu for torch_composite)
    TRACE = "trace"
    SANITIZE = "sanitize"
    PROFILE = "profile"
    CAMPAIGN = "campaign"
    COMMAND = "command"  # a named argv from the allow-list
    IMPORT = "import"  # an uploaded trace, read by `tracer trace import` (made by the server, never requested)


OUTPUT_ACTIONS = (Action.TRACE, Action.SANITIZE, Action.PROFILE, Action.CAMPAIGN, Action.IMPORT)


class Executor(str, Enum):
    LOCAL = "local"  # this host's queue: one per GPU, `cpu_slots` CPU jobs
    SLURM = "slurm"  # sbatch through submitit; Slurm schedules it (tracer/serve/slurm.py)


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    gpu: bool
    concurrency: int | None = None  # jobs of this command that may share one GPU (None: gpu_slots)


@dataclass(frozen=True, kw_only=True)
class SlurmConfig:
    partition: str | None = None
    time_min: int = 60
    gpus_per_task: int = 1  # for GPU jobs


@dataclass(frozen=True, kw_only=True)
class JobsConfig:
    actions: tuple[Action, ...]
    workloads: tuple[str, ...]
    campaigns: tuple[str, ...]
    commands: dict[str, Command] = field(default_factory=dict)
    gpus: tuple[int, ...] | None = None  # None: as many as the driver sees
    cpu_slots: int = 1  # CPU jobs at a time
    gpu_slots: int = 1  # jobs at a time on one GPU, unless the workload profile or command says `concurrency`
    timeout_s: float = DEFAULT_TIMEOUT_S
    executors: dict[str, Executor] = field(default_factory=dict)  # allow-listed name -> where its jobs run (default local)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)

    def executor(self, target: str) -> Executor:
        return self.executors.get(target, Executor.LOCAL)


@dataclass(frozen=True, kw_only=True)
class JobRequest:
    action: Action
    target: str  # a workload, campaign or command name
    device: str = "gpu"  # "cpu": `tracer run --device cpu`
    shape: str | None = None
    steps: int | None = None
    gpu: int | None = None  # a GPU of the queue, or None: the first free one
    memory: bool = False  # trace: --memory (memory access sets, hazards)

    @property
    def needs_gpu(self) -> bool:
        return self.device != "cpu"


def default_jobs() -> JobsConfig:
    from tracer.campaign.grid import CAMPAIGN_DIR
    from tracer.workloads.profiles import builtin_names

    return JobsConfig(actions=tuple(a for a in Action if a not in (Action.COMMAND, Action.IMPORT)),
                      workloads=tuple(builtin_names()), campaigns=tuple(builtin_names(CAMPAIGN_DIR)))


def load_jobs(path: Path) -> JobsConfig:
    """The allow-list file (YAML, the same safe loader as profiles): unknown keys refused."""
    from tracer.workloads.profiles import load_yaml

    data = load_yaml(path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a jobs file is a mapping (keys: actions, workloads, campaigns, commands, gpus, cpu_slots, gpu_slots, timeout_s)")
    allowed = {"schema", "actions", "workloads", "campaigns", "commands", "gpus", "cpu_slots", "gpu_slots", "timeout_s",
               "executors", "slurm"}
    extra = sorted(set(data) - allowed)
    if extra:
        raise UsageError(f"{path}: unknown key {extra[0]!r} (allowed: {', '.join(sorted(allowed))})")
    base = default_jobs()
    actions = tuple(_action(a) for a in data.get("actions", [a.value for a in base.actions]))
    commands = {str(k): _command(path, str(k), v) for k, v in (data.get("commands") or {}).items()}
    if commands and Action.COMMAND not in actions:
        actions += (Action.COMMAND,)
    gpus = data.get("gpus")
    workloads, campaigns = _names(path, data, "workloads", base.workloads), _names(path, data, "campaigns", base.campaigns)
    executors = _executors(path, data.get("executors") or {}, {*workloads, *campaigns, *commands})
    return JobsConfig(executors=executors, slurm=_slurm(path, data.get("slurm") or {}), actions=actions, workloads=workloads,
                      campaigns=campaigns, commands=commands,
                      gpus=None if gpus is None else tuple(_int(path, "gpus", g, 0, 64) for g in gpus),
                      cpu_slots=_int(path, "cpu_slots", data.get("cpu_slots", 1), 1, 64),
                      gpu_slots=_int(path, "gpu_slots", data.get("gpu_slots", 1), 1, 16),
                      timeout_s=float(_int(path, "timeout_s", data.get("timeout_s", int(DEFAULT_TIMEOUT_S)), 1, 7 * 86400)))


def _executors(path: Path, value: Any, names: set[str]) -> dict[str, Executor]:
    """`executors: {NAME: slurm|local}` for allow-listed workloads, campaigns and commands."""
    if not isinstance(value, dict):
        raise UsageError(f"{path}: executors must map allow-listed names to local or slurm")
    out = {}
    for name, kind in value.items():
        if name not in names:
            raise unknown(f"{path}: executors entry", name, sorted(names))
        try:
            out[str(name)] = Executor(kind)
        except ValueError:
            raise unknown(f"{path}: executor of {name!r}", kind, [e.value for e in Executor]) from None
    return out


def _slurm(path: Path, value: Any) -> SlurmConfig:
    if not isinstance(value, dict) or set(value) - {"partition", "time_min", "gpus_per_task"}:
        raise UsageError(f"{path}: slurm must be a mapping with partition, time_min, gpus_per_task")
    partition = value.get("partition")
    if partition is not None and not (isinstance(partition, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", partition)):
        raise UsageError(f"{path}: slurm partition {partition!r} must be a partition name")
    return SlurmConfig(partition=partition, time_min=_int(path, "slurm time_min", value.get("time_min", 60), 1, 7 * 1440),
                       gpus_per_task=_int(path, "slurm gpus_per_task", value.get("gpus_per_task", 1), 0, 16))


def _action(value: Any) -> Action:
    try:
        return Action(value)
    except ValueError:
        raise unknown("job action", value, [a.value for a in Action if a is not Action.IMPORT]) from None


def _names(path: Path, data: dict[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = data.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{path}: {key} must be a list of names")
    return tuple(value)


def _int(path: Path, key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise UsageError(f"{path}: {key} {value!r} must be an integer in {lo}..{hi}")
    return value


def _command(path: Path, name: str, value: Any) -> Command:
    if not isinstance(value, dict) or not isinstance(value.get("argv"), list) or not value["argv"] \
            or not all(isinstance(a, str) for a in value["argv"]) or set(value) - {"argv", "gpu", "concurrency"}:
        raise UsageError(f"{path}: command {name!r} must be {{argv: [program, arg, ...], gpu: true|false, concurrency: N}}")
    concurrency = value.get("concurrency")
    return Command(tuple(value["argv"]), bool(value.get("gpu", False)),
                   None if concurrency is None else _int(path, f"command {name!r} concurrency", concurrency, 1, 16))


def check_request(cfg: JobsConfig, body: Any) -> JobRequest:
    """A job request checked against the allow-list; every refusal names the value and the allowed ones."""
    if not isinstance(body, dict):
        raise UsageError("a job request is a JSON object: {action, target, device?, shape?, steps?, gpu?, memory?}")
    extra = sorted(set(body) - set(FIELDS))
    if extra:
        raise UsageError(f"unknown field {extra[0]!r} (allowed: {', '.join(FIELDS)})")
    action = _action(body.get("action"))
    if action not in cfg.actions or action is Action.IMPORT:
        raise unknown("job action", action.value, [a.value for a in cfg.actions])
    target = body.get("target")
    names = cfg.commands if action is Action.COMMAND else cfg.campaigns if action is Action.CAMPAIGN else cfg.workloads
    if target not in names:
        raise unknown(f"{action.value} target", target, list(names))
    device = body.get("device", "gpu")
    if device not in ("gpu", "cpu") or (device == "cpu" and action is not Action.RUN):
        raise UsageError(f"device {device!r}: 'gpu', or 'cpu' for action run only")
    if action is Action.COMMAND:
        device = "gpu" if cfg.commands[str(target)].gpu else "cpu"
    shape, steps, gpu = body.get("shape"), body.get("steps"), body.get("gpu")
    if shape is not None and not (isinstance(shape, str) and SHAPE.match(shape)):
        raise UsageError(f"shape {shape!r} must look like 256x256 or 256x256x256")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS):
        raise UsageError(f"steps {steps!r} must be an integer in 1..{MAX_STEPS}")
    if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, int)):
        raise UsageError(f"gpu {gpu!r} must be a GPU index of this host")
    memory = body.get("memory", False)
    if not isinstance(memory, bool) or (memory and action is not Action.TRACE):
        raise UsageError(f"memory {memory!r}: true or false, true for action trace only")
    return JobRequest(action=action, target=str(target), device=device, shape=shape, steps=steps, gpu=gpu, memory=memory)


def concurrency(cfg: JobsConfig, req: JobRequest) -> int:
    """How many jobs may share the GPU this job runs on: the command's or workload profile's
    `concurrency`, else the server's `gpu_slots` (1 unless configured)."""
    if req.action is Action.COMMAND:
        return cfg.commands[req.target].concurrency or cfg.gpu_slots
    if req.action in (Action.RUN, Action.TRACE, Action.SANITIZE, Action.PROFILE):
        from tracer.workloads.spec import load_workload

        try:
            return load_workload(req.target).concurrency or cfg.gpu_slots
        except TracerError:
            return cfg.gpu_slots  # the job itself reports an unloadable profile
    return cfg.gpu_slots


def job_argv(cfg: JobsConfig, req: JobRequest, output: Path | None) -> tuple[str, ...]:
    """The argv of a checked request; `output` is the run directory (or store) the server chose."""
    tracer = (sys.executable, "-m", "tracer")
    extra = (("--shape", req.shape) if req.shape else ()) + (("--steps", str(req.steps)) if req.steps else ())
    out = ("-o", str(output)) if output is not None else ()
    if req.action is Action.RUN:
        return (*tracer, "run", req.target, "--device", "cpu" if req.device == "cpu" else "cuda", *extra)
    if req.action is Action.TRACE:
        return (*tracer, "trace", "run", req.target, *(("--memory",) if req.memory else ()), *extra, *out)
    if req.action is Action.SANITIZE:
        return (*tracer, "sanitize", "run", req.target, *extra, *out)
    if req.action is Action.PROFILE:
        return (*tracer, "profile", "run", req.target, *extra, *out)
    if req.action is Action.CAMPAIGN:
        return (*tracer, "campaign", "run", req.target, *out)
    if req.action is Action.IMPORT:
        return (*tracer, "trace", "import", req.target, *out)
    return cfg.commands[req.target].argv
