"""Where a traced process's time went, written into its marker JSON under `timing`: seconds of
tracer's own phases (bootstrap, CUPTI start, flushes, the exit's flush and write) and of its hooks
(calls and seconds inside the dispatch mode, the CUPTI callbacks, the allocator reports, the
conversion of activity records). scripts/bench_memory_capture.py prints them side by side.
Counters are updated without a lock: a rare lost increment between threads is accepted."""
from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def process_age_s() -> float | None:
    """Seconds since this process was exec'd (/proc: uptime minus the process's start tick)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        start_ticks = int(stat[stat.rfind(")") + 2:].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


class Timing:
    def __init__(self) -> None:
        self.started = time.time()
        age = process_age_s()
        self.process_start = None if age is None else self.started - age
        self.phases: dict[str, float] = {}
        self.hooks: dict[str, list[float]] = {}  # name -> [calls, seconds]
        self.marks: dict[str, float] = {}  # event -> seconds since the process started

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0

    def hook(self, name: str) -> list[float]:
        """The [calls, seconds] cell a hook adds to (fetched once, updated in the hot path)."""
        return self.hooks.setdefault(name, [0, 0.0])

    def mark(self, event: str) -> None:
        self.marks.setdefault(event, round(time.time() - (self.process_start or self.started), 4))

    def to_json(self) -> dict[str, object]:
        end = time.time()
        return {"process_start_unix": self.process_start,
                "startup_s": None if self.process_start is None else round(self.started - self.process_start, 4),
                "alive_s": round(end - (self.process_start or self.started), 4),
                "phases_s": {k: round(v, 4) for k, v in sorted(self.phases.items())},
                "hooks": {k: {"calls": int(c), "s": round(s, 4)} for k, (c, s) in sorted(self.hooks.items())},
                "marks_s": dict(sorted(self.marks.items(), key=lambda kv: kv[1]))}
