"""`trace run` with the CUPTI backend: the command runs as given, with the capture bootstrap on
PYTHONPATH, so every Python process it starts (children of children too) writes its own trace
into RUN/procs/ (session.py). Meanwhile the process tree is sampled, so descendants that never
wrote a marker (non-Python programs) are listed as untraced instead of silently missed. After the
command, what a process that died left (its last flushed records) is completed and marked
partial, and every process gets an outcome. When exactly one process recorded kernels its trace
becomes RUN/trace.sqlite, as single-process runs always were; several make a job. The environment
(environment.json) is read here without importing torch, its GPU from the traced processes'
markers: tracer creates no CUDA context of its own."""
from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from tracer import proc
from tracer.capture.options import ENV_DIR, ENV_OPTIONS, MEMORY_DEFAULT, STOP_FILE, CaptureOptions
from tracer.errors import UsageError
from tracer.format.marker import Marker, MarkerError, State, command_json
from tracer.format.procs import PROCS, Outcome, marker_files
from tracer.store.rundir import environment, write_json

BOOT = Path(__file__).resolve().parent / "boot"
ROOT = Path(__file__).resolve().parent.parent.parent  # the folder holding the tracer package
SAMPLE_S = 0.2
LINGER_S = 30.0  # how long traced descendants still running after the command may take to write
PYTHON_NAMES = ("python", "python3", f"python3.{sys.version_info.minor}")
DEVICE_FILE = re.compile(r"^/dev/nvidia\d+$")
MARKER_NAME = re.compile(r"-(\d+)(?:-r-?\d+)?\.json$")


def resolve_command(command: list[str]) -> list[str]:
    """The command as given, except that a bare `python`/`python3`, a .py script or `-m`/`-c`
    run with tracer's own interpreter (the one with cupti-python, as the runpy capture did)."""
    if not command:
        raise UsageError("no command given after --")
    first = command[0]
    if first in PYTHON_NAMES:
        return [sys.executable, *command[1:]]
    if first in ("-m", "-c") or (first.endswith(".py") and not os.access(first, os.X_OK)):
        return [sys.executable, *command]
    return list(command)


def capture_env(procs: Path, options: CaptureOptions, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    paths = [str(BOOT), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[ENV_DIR] = str(procs)
    env[ENV_OPTIONS] = options.to_env()
    env["PYTHONUNBUFFERED"] = "1"
    if options.backend == "cupti":
        from tracer.capture.cupti import find_libcupti

        env["NVTX_INJECTION64_PATH"] = find_libcupti()
    return env


def _proc_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, session id, comm), from /proc/*/stat."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        close = text.rfind(")")
        fields = text[close + 2:].split()
        table[int(entry)] = (int(fields[1]), int(fields[3]), text[text.find("(") + 1:close])
    return table


class TreeSampler(threading.Thread):
    """Descendants of this process (and members of the sessions its children lead: orphans stay
    there), sampled every SAMPLE_S seconds while the command runs; those without a marker in
    `procs` (untraced so far) are looked at for a GPU each time (gpu_use)."""

    def __init__(self, procs: Path | None = None) -> None:
        super().__init__(daemon=True, name="tracer-tree-sampler")
        self.procs = procs
        self.me = os.getpid()
        self.seen: dict[int, dict[str, Any]] = {}
        self.root: int | None = None
        self.sessions: set[int] = set()  # kept: orphans stay in their session after its leader exits
        self.lock = threading.Lock()  # sample() also runs on the caller's thread (linger)
        self.stopping = threading.Event()
        self.available = Path("/proc/self/stat").is_file()

    def run(self) -> None:
        while self.available and not self.stopping.is_set():
            self.sample()
            self.stopping.wait(SAMPLE_S)

    def sample(self) -> None:
        try:
            table = _proc_table()
        except OSError:
            return
        with self.lock:
            self._add(table)

    def _add(self, table: dict[int, tuple[int, int, str]]) -> None:
        kids: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            kids.setdefault(ppid, []).append(pid)
        direct = kids.get(self.me, [])
        if self.root is None and direct:
            self.root = min(direct)
        self.sessions |= {pid for pid in direct if table[pid][1] == pid}
        sids = self.sessions
        found, todo = set(), list(direct)
        while todo:
            pid = todo.pop()
            if pid not in found:
                found.add(pid)
                todo += kids.get(pid, [])
        found |= {pid for pid, (_, sid, _) in table.items() if sid in sids}
        for pid in found - self.seen.keys():
            self.seen[pid] = {"pid": pid, "ppid": table[pid][0], "comm": table[pid][2], "cmdline": _cmdline(pid),
                              "gpu": GpuUse.UNKNOWN.value}
        now, traced = time.time_ns(), self._traced()
        for pid in found:
            info = self.seen[pid]
            info["last_seen_unix_ns"] = now
            if info["gpu"] != GpuUse.YES.value and pid not in traced:
                info["gpu"] = gpu_use(pid, info["gpu"]).value

    def _traced(self) -> set[int]:
        """Pids with a marker (file names <host>-<pid>[-r<RANK>].json): one directory listing."""
        try:
            names = os.listdir(self.procs) if self.procs is not None else []
        except OSError:
            return set()
        return {int(m.group(1)) for m in map(MARKER_NAME.search, names) if m}

    def adopt(self, leader: int) -> None:
        """The command's own process (proc.run's direct child, a session leader): its session's
        members are the command's, found after it exited too."""
        with self.lock:
            self.sessions.add(leader)
            if self.root is None:
                self.root = leader

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=5)
        if self.available:
            self.sample()


class GpuUse(str, Enum):
    """Whether a process was seen holding a GPU: an open NVIDIA device file (/dev/nvidiaN, which a
    CUDA context keeps open), looked for at each sample of the process tree."""
    YES = "yes"
    NOT_SEEN = "not seen"  # looked at, never holding one (it may have between samples)
    UNKNOWN = "unknown"  # not allowed to look (another user's process); one shorter than a sample is not listed at all


def gpu_use(pid: int, before: str) -> GpuUse:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:  # gone meanwhile: what was known
        return GpuUse(before)
    except OSError:
        return GpuUse.UNKNOWN if before != GpuUse.NOT_SEEN.value else GpuUse.NOT_SEEN
    for fd in fds:
        try:
            if DEVICE_FILE.match(os.readlink(f"/proc/{pid}/fd/{fd}")):
                return GpuUse.YES
        except OSError:  # closed meanwhile
            continue
    return GpuUse.NOT_SEEN


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a][:20]


def read_markers(procs: Path, strict: bool = True) -> list[Marker]:
    """Every marker in procs/. `strict=False` (polling while the command runs) skips one that cannot
    be read; settling the run reads them strictly: a marker that is not one is an error."""
    out = []
    for path in marker_files(procs):
        try:
            out.append(Marker.load(path))
        except MarkerError:
            if strict:
                raise
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return Path(f"/proc/{pid}").exists() and not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return text[text.rfind(")") + 2:].startswith("Z")


def _pythonic(info: dict[str, Any]) -> bool:
    return "python" in info["comm"] or any("python" in Path(a).name for a in info["cmdline"][:1])


def wait_for_writers(procs: Path, seen: dict[int, dict[str, Any]], deadline: float) -> None:
    """Traced processes still running after the command returned (orphans, daemons) may still
    be writing their traces: wait for them (and for Python descendants yet to write a marker),
    up to the deadline. Non-Python leftovers are not waited for."""
    while time.monotonic() < deadline:
        markers = {m.pid: m for m in read_markers(procs, strict=False)}
        running = [pid for pid, m in markers.items() if m.state is State.RUNNING and _alive(pid)]
        running += [pid for pid, info in list(seen.items())  # a copy: the sampler may still be adding
                    if pid not in markers and _pythonic(info) and _alive(pid)]
        if not running:
            return
        time.sleep(SAMPLE_S)


def stop_tracing(procs: Path, deadline: float) -> None:
    """--stop-after: ask every traced process to finish its trace (STOP_FILE, seen by its flush
    thread within flush_s), and wait until those that started CUPTI have, up to the deadline. The
    processes run on untraced; Python processes started later are not traced."""
    (procs / STOP_FILE).write_text("stop\n")
    while time.monotonic() < deadline:
        busy = [m for m in read_markers(procs, strict=False)
                if m.state is State.RUNNING and m.cupti_started_by and _alive(m.pid)]
        if not busy:
            return
        time.sleep(SAMPLE_S / 2)


@dataclass(frozen=True, kw_only=True)
class CaptureResult:
    proc: proc.ProcResult
    processes: tuple[Marker, ...]  # settled: each with its outcome
    untraced: tuple[dict[str, Any], ...]
    trace: Path | None  # RUN/trace.sqlite when one process's trace stands for the run
    job: bool  # several processes recorded kernels: their traces stay under RUN/procs/
    options: CaptureOptions = field(default_factory=CaptureOptions)
    sampled: bool = True
    environment: dict[str, Any] = field(default_factory=dict)
    tracer_s: dict[str, float] = field(default_factory=dict)  # tracer's own seconds before and after the command

    def command_fields(self) -> dict[str, Any]:
        """What command.json records about the processes of the run."""
        return {"memory": self.options.memory, "job": self.job, "tracer_s": self.tracer_s,
                "processes": [command_json(m) for m in self.processes],
                "untraced": list(self.untraced),
                "untraced_note": (f"process tree sampled every {SAMPLE_S} s: shorter-lived programs may be missed"
                                  if self.sampled else "process tree not sampled (no /proc)")}

    @property
    def untraced_gpu(self) -> list[dict[str, Any]]:
        """Untraced processes that held a GPU, or of which that is not known."""
        return [u for u in self.untraced if u.get("gpu") != GpuUse.NOT_SEEN.value]

    @property
    def partial(self) -> bool:
        return any(m.outcome is Outcome.PARTIAL for m in self.processes if m.kernels)

    def failure(self) -> str:
        """Why the run cannot count as a clean capture ("" when it can): the command failed, or a
        process that recorded kernels did not finish its trace."""
        code = self.proc.returncode
        why = [f"the traced command {'was killed by signal ' + str(-code) if code < 0 else 'exited ' + str(code)}"
               ] if code not in (0, None) else []
        died = [m.file for m in self.processes if m.outcome in (Outcome.PARTIAL, Outcome.NO_TRACE)]
        if died:
            why.append(f"{len(died)} process(es) died before writing their trace: {', '.join(died)}")
        return "; ".join(why)


def untraced(seen: dict[int, dict[str, Any]], markers: list[Marker]) -> list[dict[str, Any]]:
    traced = {m.pid for m in markers}
    return [info for pid, info in sorted(seen.items()) if pid not in traced]


def unflushed_s(m: Marker, seen: dict[int, dict[str, Any]], now_ns: int) -> float | None:
    """At most how long a process that died ran after its last flush (what its trace may miss):
    from that flush (or its CUPTI start) to the last sample that saw it alive plus one sample
    interval (now when never sampled); 0 when it flushed in its fatal-signal handler."""
    if m.flushed_at_signal:
        return 0.0
    last = m.last_flush_unix_ns or (m.clock_start or (0, 0))[1]
    if not last or not m.cupti_started_by:
        return None
    seen_at = seen.get(m.pid, {}).get("last_seen_unix_ns")
    gone_by = min(now_ns, seen_at + int(SAMPLE_S * 1e9)) if seen_at else now_ns
    return round(max(0, gone_by - int(last)) / 1e9, 3)


def settle(procs: Path, markers: list[Marker], flush_s: float, seen: dict[int, dict[str, Any]] | None = None) -> list[Marker]:
    """Every process's outcome once the command is over: complete, partial (it died; what it
    flushed is completed and marked so, and its marker rewritten, with how long it ran unflushed),
    no trace (it died before flushing anything), no CUDA (it never used CUDA: nothing to trace),
    still running."""
    from tracer.capture.nsys_schema import partial_path, salvage

    out, now = [], time.time_ns()
    for m in markers:
        final = procs / f"{m.file}.sqlite"
        partial = partial_path(final)
        alive = m.state is State.RUNNING and _alive(m.pid)
        kernels = None
        if partial.is_file() and not final.is_file() and not alive:
            note = (f"the process died before exiting: records up to its last flush (every {flush_s:g} s)"
                    if m.state is State.RUNNING else "the process did not finish writing its trace at exit")
            kernels = salvage(partial, final, note)
            if kernels is not None:
                m = m.with_(kernels=kernels, trace=final.name, partial=note)
        if m.state is State.RUNNING and not alive:
            m = m.with_(state=State.DIED) if kernels is not None else m.with_(state=State.DIED, trace=None, kernels=0)
            m = m.with_(unflushed_s=unflushed_s(m, seen or {}, now))
        if kernels is not None or m.state is State.DIED:
            write_json(procs / f"{m.file}.json", m.to_json())
        out.append(m.with_(outcome=_outcome(m, final)))
    return out


def _outcome(m: Marker, final: Path) -> Outcome:
    if m.state is State.RUNNING:
        return Outcome.STILL_RUNNING
    if final.is_file():
        return Outcome.PARTIAL if m.partial else Outcome.COMPLETE
    if m.state is State.EXITED and m.trace is None and not m.cuda:
        return Outcome.NO_CUDA
    return Outcome.NO_TRACE


def pick_trace(markers: list[Marker], procs: Path, root: int | None = None) -> tuple[Marker | None, bool]:
    """(the marker whose trace stands for the run, is it a job). Only a process that recorded
    kernels can stand for the run: a launcher's empty trace never becomes the run's analysis."""
    busy = [m for m in markers if (m.kernels or 0) > 0 and (procs / f"{m.file}.sqlite").is_file()]
    if len(busy) > 1:
        return None, True
    return (busy[0] if busy else None), False


def how_ended(m: Marker) -> str:
    """How a process ended, in words (from its settled marker)."""
    state, code = m.state, m.exit
    if state is State.DIED and m.fatal_signal:
        return f"died of {_signame(m.fatal_signal)}" + (" (flushed at it)" if m.flushed_at_signal else "")
    if state is State.DIED:
        gap = m.unflushed_s
        return "died without exiting (SIGKILL or a crash)" + (f": up to {gap:g} s unflushed" if gap is not None else "")
    if state is State.DETACHED:
        return "traced until --stop-after, left running"
    if state is State.EXITED and m.ended == "sigterm":
        return "stopped by SIGTERM"
    if state is State.EXITED and m.ended == "os._exit":
        return f"left by os._exit({code if code is not None else 0})"
    if state is State.EXITED:
        return f"exited {code if code is not None else 0}"
    return state.value


def describe(m: Marker) -> str:
    """One line per process: who it is, how it ended, what its trace holds."""
    who = f"rank {m.rank}" if m.rank is not None else ("fork child" if m.fork_child else "process")
    how = how_ended(m)
    kernels = m.kernels or 0
    what = {Outcome.COMPLETE: f"complete trace, {kernels} kernels",
            Outcome.PARTIAL: f"PARTIAL trace, {kernels} kernels (up to its last flush)", Outcome.NO_TRACE: "NO TRACE",
            Outcome.NO_CUDA: "no CUDA use, nothing to trace", Outcome.STILL_RUNNING: "still running: no trace"}
    extra = "".join(f"; {note}" for note in (m.untraced_cuda, m.trace_error) if note)
    return f"  {m.file:<28} {who:<10} {how:<42} {what[m.outcome] if m.outcome else 'not settled'}{extra}"


def _signame(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def untraced_line(u: dict[str, Any]) -> str:
    """One line per process of the command that tracer did not trace."""
    what = " ".join(u.get("cmdline") or []) or u.get("comm", "?")
    gpu = {GpuUse.YES.value: "HELD A GPU: its GPU work is missing from the verdicts",
           GpuUse.NOT_SEEN.value: "not seen holding a GPU",
           GpuUse.UNKNOWN.value: "whether it used a GPU is UNKNOWN"}.get(str(u.get("gpu")), "GPU use unknown")
    return f"  untraced pid {u.get('pid')} ({u.get('comm', '?')}): {what[:80]}: {gpu}"


def outcome_summary(result: CaptureResult) -> str:
    """One line: how many processes, and how many ended each way ("2 processes: 1 no CUDA, 1 no trace")."""
    counts: dict[str, int] = {}
    for m in result.processes:
        word = m.outcome.value if m.outcome else "not settled"
        counts[word] = counts.get(word, 0) + 1
    n = len(result.processes)
    ways = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    return f"{n} traced process{'es' if n != 1 else ''}" + (f": {ways}" if ways else "") + \
        (f"; {len(result.untraced)} untraced" if result.untraced else "")


def with_gpu(env: dict[str, Any], markers: list[Marker]) -> dict[str, Any]:
    """environment.json: `env` (versions, read here) and the GPUs the traced processes held a
    context on (their markers' `devices`, ranks first): tracer never touches CUDA itself."""
    found: list[dict[str, Any]] = []
    for m in sorted(markers, key=lambda m: (m.rank is None, m.rank or 0, m.pid)):
        found += [d for d in m.devices or () if d not in found]
    if not found:
        return env | {"gpu": None, "gpu_note": "no traced process reported a GPU (none used CUDA, or none lived to exit)"}
    return env | {"gpu": found[0]} | ({"gpus": found} if len(found) > 1 else {})


def capture_run(command: list[str], run_dir: Path, logs: Path, timeout: float, *, memory: bool = MEMORY_DEFAULT,
                backend: str = "cupti", devices: tuple[str, ...] = ("cuda",),
                options: CaptureOptions | None = None, describe: bool = False,
                stop_after: float | None = None, window: tuple[str, str] = ("", "")) -> CaptureResult:
    """Run `command` traced into run_dir (procs/, and trace.sqlite + process.json when one
    process's trace stands for the run); stdout/stderr go to logs/. `options` (all of them, for
    benchmarks and tests) wins over memory/backend/devices. `describe`: also what environment.json
    holds (versions read while the command runs; the GPU from the markers). `stop_after`: the
    traced processes finish their traces then and the command is left running (stop_tracing). `window`:
    (memory_steps, memory_range) of CaptureOptions, the memory capture window."""
    entered = time.monotonic()
    options = options or CaptureOptions(backend=backend, memory=memory, devices=devices, memory_steps=window[0],
                                        memory_range=window[1])
    if options.backend == "cupti":
        from tracer.capture.cupti import require_cupti_python

        require_cupti_python()
    argv = resolve_command(command)
    procs = (run_dir / PROCS).resolve()  # absolute: traced processes may change their working directory
    procs.mkdir(parents=True, exist_ok=True)
    env = capture_env(procs, options)
    env_info: dict[str, Any] = {}
    described = threading.Thread(target=lambda: env_info.update(environment(gpu=False)), daemon=True,
                                 name="tracer-environment")
    if describe:
        described.start()  # package versions (file reads): while the command runs
    sampler = TreeSampler(procs)
    sampler.start()
    start = time.monotonic()

    def linger(deadline: float, leader: int) -> None:  # before proc.run ends what the command left in its group
        sampler.adopt(leader)  # its session, even when the command exited before the sampler's first look
        sampler.sample()  # now, not at the next tick: what the command left running
        wait_for_writers(procs, sampler.seen, min(deadline, time.monotonic() + LINGER_S))

    def stop(deadline: float) -> None:
        sampler.sample()
        stop_tracing(procs, min(deadline, time.monotonic() + LINGER_S))

    try:
        res = proc.run(argv, timeout=timeout, stdout_path=logs / "stdout.log", stderr_path=logs / "stderr.log", env=env,
                       linger=linger, stop_after=stop_after, on_stop=stop, interruptible=True)
    finally:
        sampler.stop()
    ended = time.monotonic()
    if not res.detached:
        wait_for_writers(procs, sampler.seen, min(start + timeout, time.monotonic() + LINGER_S))  # those outside the group
    markers = settle(procs, read_markers(procs), options.flush_s, sampler.seen)
    chosen, job = pick_trace(markers, procs, sampler.root)
    trace = None
    if chosen is not None:
        trace = run_dir / "trace.sqlite"
        (procs / f"{chosen.file}.sqlite").replace(trace)
        shutil.copyfile(procs / f"{chosen.file}.json", run_dir / "process.json")
    if describe:
        described.join()
        env_info = with_gpu(env_info, markers)
    own = {"before_command": round(start - entered, 4), "after_command": round(time.monotonic() - ended, 4)}
    return CaptureResult(proc=res, processes=tuple(markers), untraced=tuple(untraced(sampler.seen, markers)), trace=trace, job=job, options=options,
                         sampled=sampler.available, environment=env_info, tracer_s=own)


def capture(command: list[str], out: Path, logs: Path, timeout: float, *, memory: bool = False) -> proc.ProcResult:
    """Trace `command` (every Python process of it) and put the trace that stands for the run at
    `out` (none when no process, or several, recorded kernels); stdout/stderr go to logs/. For one
    file per process and their outcomes, see capture_run."""
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}-") as tmp:
        result = capture_run(command, Path(tmp), logs, timeout, memory=memory)
        if result.trace is not None:
            result.trace.replace(out)
    return result.proc
