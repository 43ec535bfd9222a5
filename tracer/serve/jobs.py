"""The job queue: requests checked against the allow-list (tracer/serve/config.py) become argv
lists run through tracer/proc.py (each job its own process group, output into a log); one queue
per GPU of this host and `cpu_slots` CPU jobs at a time, CPU jobs never waiting behind GPU jobs.
A GPU holds one job at a time unless every job on it allows more (`concurrency` of the workload
profile or command, else the server's `gpu_slots`); jobs for a GPU start in the order they came.
Entries the allow-list sends to Slurm are submitted there at once (tracer/serve/slurm.py) and
followed through scontrol. Every state change is committed to SQLite first, so a restarted server
knows each job: a local one that was running when the server died is marked `interrupted` (its
orphaned process group is killed), never run again by itself; a Slurm job is followed again (it
ran on without the server); queued jobs stay queued.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Any

from tracer import proc
from tracer.errors import UsageError
from tracer.serve import slurm
from tracer.serve.config import OUTPUT_ACTIONS, Action, Executor, JobRequest, JobsConfig, concurrency, job_argv
from tracer.serve.db import Db, NotFound

TICK_S = 0.2
TAIL_BYTES = 16 * 1024
TAIL_LINES = 60
SLURM_POLL_S = 2.0  # scontrol is a process: asked this often per Slurm job


class JobState(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"  # exited 0
    FAILED = "failed"  # exited non-zero, killed at its timeout, or could not start
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # running when the server stopped or died: not run again by itself


FINAL = (JobState.DONE, JobState.FAILED, JobState.CANCELLED, JobState.INTERRUPTED)
COLUMNS = "id, created, state, request, argv, needs_gpu, gpu, pid, exit, started, ended, log, output, note, concurrency, executor, slurm_id"


class JobQueue:
    def __init__(self, db: Db, cfg: JobsConfig, gpus: tuple[int, ...], output_dir: Path, log_dir: Path,
                 on_finish: Callable[[], None] | None = None) -> None:
        self.db, self.cfg, self.gpus = db, cfg, gpus
        self.output_dir, self.log_dir = output_dir, log_dir
        self.on_finish = on_finish
        self.running: dict[int, tuple[proc.Started, float]] = {}  # id -> (process, deadline)
        self.on_slurm: dict[int, tuple[str, Path, float]] = {}  # id -> (Slurm job id, log, next scontrol)
        self.lock = threading.RLock()
        self.version = 0  # bumped at every change of a job's state: answers about jobs are keyed by it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- life cycle ------------------------------------------------------------------------------

    def recover(self) -> list[int]:
        """At start: local jobs the last server left running are `interrupted` (their orphans
        killed); Slurm jobs are followed again."""
        for job_id, slurm_id, log in self.db.query("SELECT id, slurm_id, log FROM jobs WHERE state=? AND executor=? AND slurm_id IS NOT NULL",
                                                   (JobState.RUNNING.value, Executor.SLURM.value)):
            self.on_slurm[job_id] = (slurm_id, Path(log), 0.0)
        rows = self.db.query("SELECT id, pid, pid_ticks FROM jobs WHERE state=? AND (executor=? OR slurm_id IS NULL)",
                             (JobState.RUNNING.value, Executor.LOCAL.value))
        with self.db.tx() as con:
            for job_id, pid, ticks in rows:
                killed = pid is not None and proc.stop_orphan_group(int(pid), ticks)
                note = "the server stopped while it ran" + ("; its leftover processes were killed" if killed else "")
                con.execute("UPDATE jobs SET state=?, ended=?, note=? WHERE id=?",
                            (JobState.INTERRUPTED.value, time.time(), note, job_id))
        return [r[0] for r in rows]

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name="tracer-serve-jobs", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        """Stop the scheduler; jobs still running are stopped (their whole group) and marked interrupted."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self.lock:
            for job_id, (started, _) in list(self.running.items()):
                started.stop()
                self._finish(job_id, JobState.INTERRUPTED, started.poll(), "the server was stopped while it ran")
            self.running.clear()

    def _loop(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.tick()
            except Exception as exc:
                import sys

                print(f"tracer serve: job scheduler: {type(exc).__name__}: {exc}", file=sys.stderr)

    # ---- requests ----------------------------------------------------------------------------------

    def submit(self, req: JobRequest) -> dict[str, Any]:
        if req.needs_gpu and not self.gpus:
            raise UsageError("this host has no GPU for the job queue: only CPU jobs (action run, device cpu) can run here")
        if req.gpu is not None and req.gpu not in self.gpus:
            raise UsageError(f"gpu {req.gpu} is not one of this server's GPUs ({', '.join(map(str, self.gpus)) or 'none'})")
        with self.db.tx() as con:
            executor = self.cfg.executor(req.target) if req.action is not Action.IMPORT else Executor.LOCAL
            cur = con.execute("INSERT INTO jobs (created, state, request, argv, needs_gpu, gpu, log, concurrency, executor) "
                              "VALUES (?,?,?,?,?,?,?,?,?)",
                              (time.time(), JobState.QUEUED.value, json.dumps(_req_json(req)), "[]", int(req.needs_gpu),
                               req.gpu, "", concurrency(self.cfg, req), executor.value))
            job_id = int(cur.lastrowid or 0)
            output = self._output(job_id, req)
            argv = job_argv(self.cfg, req, output)
            con.execute("UPDATE jobs SET argv=?, log=?, output=? WHERE id=?",
                        (json.dumps(argv), str(self.log_dir / f"job-{job_id}.log"), str(output) if output else None, job_id))
        self.version += 1
        return self.get(job_id)

    def _output(self, job_id: int, req: JobRequest) -> Path | None:
        if req.action not in OUTPUT_ACTIONS:
            return None
        name = Path(req.target).name if req.action is Action.IMPORT else req.target
        stem = f"{req.action.value}-{name}-job{job_id}"
        return self.output_dir / (f"{stem}.sqlite" if req.action is Action.CAMPAIGN else stem)

    def cancel(self, job_id: int) -> dict[str, Any]:
        job = self.get(job_id)
        with self.lock:
            if job["state"] == JobState.QUEUED.value:
                self._finish(job_id, JobState.CANCELLED, None, "cancelled before it started")
            elif job_id in self.running:
                started, _ = self.running.pop(job_id)
                started.stop()
                self._finish(job_id, JobState.CANCELLED, started.poll(), "cancelled: its process group was stopped")
            elif job_id in self.on_slurm:
                slurm_id, _, _ = self.on_slurm.pop(job_id)
                slurm.cancel(slurm_id)
                self._finish(job_id, JobState.CANCELLED, None, f"cancelled: scancel {slurm_id}")
        return self.get(job_id)

    def get(self, job_id: int, tail: bool = True) -> dict[str, Any]:
        rows = self.db.query(f"SELECT {COLUMNS} FROM jobs WHERE id=?", (job_id,))
        if not rows:
            raise NotFound(f"no job {job_id}")
        return _job_json(rows[0], tail)

    def list(self, limit: int = 100) -> list[dict[str, Any]]:
        rows = self.db.query(f"SELECT {COLUMNS} FROM jobs ORDER BY id DESC LIMIT ?", (limit,))
        return [_job_json(r, False) for r in rows]

    # ---- scheduling --------------------------------------------------------------------------------

    def tick(self) -> None:
        with self.lock:
            self._reap()
            self._launch()

    def _reap(self) -> None:
        self._reap_slurm()
        for job_id, (started, deadline) in list(self.running.items()):
            code = started.poll()
            if code is None and time.monotonic() < deadline:
                continue
            del self.running[job_id]
            if code is None:
                started.stop()
                self._finish(job_id, JobState.FAILED, started.poll(), f"killed at its timeout of {self.cfg.timeout_s:g} s")
            else:
                self._finish(job_id, JobState.DONE if code == 0 else JobState.FAILED, code, "")

    def _launch(self) -> None:
        local = (JobState.RUNNING.value, Executor.LOCAL.value)
        on_gpu: dict[int, list[int]] = {g: [] for g in self.gpus}  # GPU -> the concurrency of each job on it
        for g, c in self.db.query("SELECT gpu, concurrency FROM jobs WHERE state=? AND executor=? AND needs_gpu=1", local):
            on_gpu.setdefault(g, []).append(c)
        cpu_running = self.db.query("SELECT count(*) FROM jobs WHERE state=? AND executor=? AND needs_gpu=0", local)[0][0]
        waiting: set[int] = set()  # GPUs an earlier queued job waits for: later jobs do not overtake it there
        for job_id, needs_gpu, gpu, conc, executor in self.db.query(
                "SELECT id, needs_gpu, gpu, concurrency, executor FROM jobs WHERE state=? ORDER BY id", (JobState.QUEUED.value,)):
            if executor == Executor.SLURM.value:
                self._run_slurm(job_id)
            elif not needs_gpu:
                if cpu_running < self.cfg.cpu_slots:
                    cpu_running += 1
                    self._run(job_id, None)
            else:
                wanted = [gpu] if gpu is not None else list(self.gpus)
                free = [g for g in wanted if g not in waiting and fits(on_gpu.get(g, []), conc)]
                if free:
                    pick = min(free, key=lambda g: len(on_gpu.get(g, [])))  # the least shared of the GPUs it fits on
                    on_gpu.setdefault(pick, []).append(conc)
                    self._run(job_id, pick)
                else:
                    waiting.update(wanted)

    def _run(self, job_id: int, gpu: int | None) -> None:
        import os

        row = self.db.query("SELECT argv, log FROM jobs WHERE id=?", (job_id,))[0]
        argv, log = json.loads(row[0]), Path(row[1])
        env = dict(os.environ)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with self.db.tx() as con:  # committed before the start: a server dying in between never runs it twice
            con.execute("UPDATE jobs SET state=?, gpu=?, started=? WHERE id=?", (JobState.RUNNING.value, gpu, time.time(), job_id))
        self.version += 1
        try:
            started = proc.start(argv, log_path=log, env=env)
        except Exception as exc:
            self._finish(job_id, JobState.FAILED, None, f"could not start: {exc}")
            return
        pid = started.popen.pid
        with self.db.tx() as con:
            con.execute("UPDATE jobs SET pid=?, pid_ticks=? WHERE id=?", (pid, proc.start_ticks(pid), job_id))
        self.running[job_id] = (started, time.monotonic() + self.cfg.timeout_s)

    def _run_slurm(self, job_id: int) -> None:
        row = self.db.query("SELECT argv, log, needs_gpu FROM jobs WHERE id=?", (job_id,))[0]
        argv, log = json.loads(row[0]), Path(row[1])
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with self.db.tx() as con:  # committed before sbatch: a server dying in between never submits it twice
            con.execute("UPDATE jobs SET state=?, started=?, note=? WHERE id=?",
                        (JobState.RUNNING.value, time.time(), "submitting to Slurm", job_id))
        self.version += 1
        try:
            slurm_id = slurm.submit(argv, log, self.log_dir / "slurm", self.cfg.slurm, bool(row[2]), f"tracer-serve-{job_id}")
        except Exception as exc:
            self._finish(job_id, JobState.FAILED, None, f"could not submit to Slurm: {exc}")
            return
        with self.db.tx() as con:
            con.execute("UPDATE jobs SET slurm_id=?, note=? WHERE id=?", (slurm_id, f"Slurm job {slurm_id}: submitted", job_id))
        self.on_slurm[job_id] = (slurm_id, log, time.monotonic() + SLURM_POLL_S)

    def _reap_slurm(self) -> None:
        now = time.monotonic()
        for job_id, (slurm_id, log, due) in list(self.on_slurm.items()):
            if now < due:
                continue
            state, code = slurm.state(slurm_id)
            exit_file = slurm.exit_file(log)
            if state in slurm.RUNNING or (state == "UNKNOWN" and not exit_file.is_file()):
                self.on_slurm[job_id] = (slurm_id, log, now + SLURM_POLL_S)
                with self.db.tx() as con:
                    con.execute("UPDATE jobs SET note=? WHERE id=?", (f"Slurm job {slurm_id}: {state}", job_id))
                continue
            del self.on_slurm[job_id]
            exit_code = _read_exit(exit_file)
            note = f"Slurm job {slurm_id}: {state} ExitCode={code or '?'}"
            self._finish(job_id, JobState.DONE if exit_code == 0 and state in ("COMPLETED", "UNKNOWN") else JobState.FAILED,
                         exit_code, note)

    def _finish(self, job_id: int, state: JobState, code: int | None, note: str) -> None:
        with self.db.tx() as con:
            con.execute("UPDATE jobs SET state=?, exit=?, ended=?, note=? WHERE id=?",
                        (state.value, code, time.time(), note, job_id))
        self.version += 1
        if self.on_finish is not None:
            self.on_finish()


def fits(on_gpu: list[int], conc: int) -> bool:
    """May a job of concurrency `conc` join the jobs already on a GPU (their concurrencies)? Only
    when no job there, itself included, would then share the GPU with more than it allows."""
    return all(len(on_gpu) + 1 <= c for c in (*on_gpu, conc))


def _read_exit(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _req_json(req: JobRequest) -> dict[str, Any]:
    d = asdict(req)
    d["action"] = req.action.value
    return d


def tail_of(log: Path) -> list[str]:
    try:
        with open(log, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    lines = text.replace("\r", "\n").splitlines()
    return lines[1 - TAIL_LINES:] if size > TAIL_BYTES else lines[-TAIL_LINES:]


def _job_json(r: tuple[Any, ...], tail: bool) -> dict[str, Any]:
    (job_id, created, state, request, argv, _needs_gpu, gpu, _pid, code, started, ended, log, output, note, conc, executor,
     slurm_id) = r
    req = json.loads(request)
    end = ended if ended is not None else time.time()
    lines = tail_of(Path(log)) if log and (tail or state == JobState.RUNNING.value) else []
    out = {"id": job_id, "state": state, "created": created, "started": started, "ended": ended,
           "action": req["action"], "target": req["target"], "device": req["device"], "gpu": gpu,
           "argv": json.loads(argv), "exit": code, "output": Path(output).name if output else None,
           "output_path": output, "note": note, "elapsed_s": round(end - started, 1) if started else None,
           "progress": next((ln for ln in reversed(lines) if ln.strip()), ""), "concurrency": conc, "executor": executor,
           "slurm_id": slurm_id}
    if tail:
        out["log_tail"] = lines
    return out
