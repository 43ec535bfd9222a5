"""The memory capture window (`trace run --memory-steps A:B`, `--memory-range GLOB`): memory access
sets are recorded only while an NVTX range of the window is open, on any thread; everything else is
traced as plain CUPTI and counted as "not judged" by the hazard check.

A step is an NVTX range named as tracer's step summaries name them (`step3`, `iteration 3`,
`iter_3`, `ProfilerStep#3`, or such a name as the first segment of a path); `A:B` are steps A to
B-1, as a Python slice. The ranges are seen where the program pushes them: torch.cuda.nvtx, the
`nvtx` package's functions and its `Domain` methods (hooked in their modules, whichever names the
program imported), and every other NVTX call (C/C++ extensions, ctypes: nvtxRangePushA/W/Ex,
nvtxRangeStartA/W/Ex, their nvtxDomain* forms) through CUPTI's NVTX callbacks (callbacks.py), which
skip the calls the Python hooks already saw. No torch import here."""
from __future__ import annotations

import fnmatch
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

STEP = re.compile(r"^(?:profilerstep#|step|iteration|iter)[ _#:.\-]?(\d+)$", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class WindowSpec:
    """Which NVTX ranges open the window: steps [first, stop) or names matching a glob."""

    first: int = -1
    stop: int = -1
    glob: str = ""

    @property
    def whole_run(self) -> bool:
        return self.first < 0 and not self.glob

    def describe(self) -> str:
        if self.glob:
            return f"NVTX ranges {self.glob!r}"
        return f"steps {self.first}:{self.stop}" if not self.whole_run else "whole run"

    def opens(self, name: str) -> bool:
        if self.glob:
            return fnmatch.fnmatchcase(name, self.glob)
        n = step_number(name)
        return n is not None and self.first <= n < self.stop


def step_number(name: str) -> int | None:
    """'step3' -> 3, 'iteration 3/fwd' -> 3, 'ProfilerStep#3' -> 3; else None."""
    m = STEP.match(name.split("/", 1)[0].strip())
    return int(m.group(1)) if m else None


def parse_steps(text: str) -> tuple[int, int]:
    """'A:B' -> (A, B) with 0 <= A < B; ValueError naming the value otherwise."""
    a, sep, b = text.partition(":")
    if sep and a.strip().isdigit() and b.strip().isdigit() and int(a) < int(b):
        return int(a), int(b)
    raise ValueError(f"--memory-steps {text!r} must be A:B, two step numbers with A < B (steps A to B-1, as a Python slice)")


class MemoryWindow:
    """Open while at least one range of the window is open (counted over all threads: autograd's
    worker threads launch backward kernels with none of the main thread's ranges open). `on_change`
    is told each opening and closing (the CUPTI launch callbacks are switched with it)."""

    def __init__(self, spec: WindowSpec, clock: Callable[[], int]) -> None:
        self.spec, self.clock = spec, clock
        self.open = spec.whole_run
        self.depth = 0
        self.intervals: list[tuple[int, int]] = []
        self.began = 0
        self.tls = threading.local()
        self.lock = threading.Lock()
        self.listeners: list[Callable[[bool], None]] = []

    def hooked(self) -> bool:
        """Inside a Python NVTX hook on this thread: CUPTI's NVTX callback for the same call is skipped."""
        return bool(getattr(self.tls, "hooked", 0))

    def through(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`call` (a real NVTX function) with this thread marked as inside a Python hook."""
        tls = self.tls
        tls.hooked = getattr(tls, "hooked", 0) + 1
        try:
            return call(*args, **kwargs)
        finally:
            tls.hooked -= 1

    def _stack(self) -> list[bool]:
        s = getattr(self.tls, "stack", None)
        if s is None:
            s = self.tls.stack = []
        return s

    def push(self, name: object) -> None:
        opens = isinstance(name, str) and self.spec.opens(name)
        self._stack().append(opens)
        if opens:
            self._open()

    def pop(self) -> None:
        s = self._stack()
        if s and s.pop():
            self._close()

    def start(self, name: object) -> int:
        """A start/end range (any thread may end it): its id, 1 when it opened the window."""
        opens = isinstance(name, str) and self.spec.opens(name)
        if opens:
            self._open()
        return int(opens)

    def end(self, opened: int) -> None:
        if opened:
            self._close()

    def _open(self) -> None:
        with self.lock:
            self.depth += 1
            if self.depth == 1:
                self.began = self.clock()
                self._set(True)

    def _close(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                self.intervals.append((self.began, self.clock()))
                self._set(False)

    def _set(self, is_open: bool) -> None:
        self.open = is_open
        for listen in self.listeners:
            listen(is_open)

    def finish(self) -> list[tuple[int, int]]:
        """The windows, a last one still open ending now."""
        with self.lock:
            if self.depth > 0 and not self.spec.whole_run:
                return [*self.intervals, (self.began, self.clock())]
        return list(self.intervals)


def hook_torch_nvtx(window: MemoryWindow, nvtx_module: Any) -> None:
    """torch.cuda.nvtx calls its module's `_nvtx` by name: a proxy there sees every push and pop."""
    real = nvtx_module._nvtx
    starts: dict[int, int] = {}

    class Proxy:
        def rangePushA(self, msg: str) -> Any:  # torch's name
            out = window.through(real.rangePushA, msg)
            window.push(msg)
            return out

        def rangePop(self) -> Any:  # torch's name
            window.pop()
            return window.through(real.rangePop)

        def rangeStartA(self, msg: str) -> Any:  # torch's name
            rid = window.through(real.rangeStartA, msg)
            starts[rid] = window.start(msg)
            return rid

        def rangeEnd(self, rid: Any) -> Any:  # torch's name
            window.end(starts.pop(rid, 0))
            return window.through(real.rangeEnd, rid)

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    nvtx_module._nvtx = Proxy()


def message_of(attributes: Any) -> object:
    """The `nvtx` package's EventAttributes -> its message (a RegisteredString's text)."""
    message = getattr(attributes, "message", None)
    return getattr(message, "string", message)


def hook_nvtx_package(window: MemoryWindow, module: Any) -> None:
    """The `nvtx` package's annotate, push_range, pop_range, start_range and end_range call its
    module's libnvtx_* by name."""
    push, pop = module.libnvtx_push_range, module.libnvtx_pop_range
    start: Any = getattr(module, "libnvtx_start_range", None)
    end: Any = getattr(module, "libnvtx_end_range", None)
    starts: dict[Any, int] = {}

    def push_range(attributes: Any, domain: Any) -> Any:
        out = window.through(push, attributes, domain)
        window.push(message_of(attributes))
        return out

    def pop_range(domain: Any) -> Any:
        window.pop()
        return window.through(pop, domain)

    def start_range(attributes: Any, domain: Any) -> Any:
        rid = window.through(start, attributes, domain)
        starts[rid] = window.start(message_of(attributes))
        return rid

    def end_range(rid: Any, domain: Any) -> Any:
        window.end(starts.pop(rid, 0))
        return window.through(end, rid, domain)

    module.libnvtx_push_range, module.libnvtx_pop_range = push_range, pop_range
    if start is not None and end is not None:
        module.libnvtx_start_range, module.libnvtx_end_range = start_range, end_range


def hook_nvtx_domain(window: MemoryWindow, domain_cls: Any) -> None:
    """`nvtx.Domain`'s push_range, pop_range, start_range and end_range call the C API directly
    (not the module's libnvtx_*): hooked on the class. The message is the keyword `message`, else
    the attributes' (read after the call, which may set them)."""
    push, pop, start, end = domain_cls.push_range, domain_cls.pop_range, domain_cls.start_range, domain_cls.end_range
    starts: dict[Any, int] = {}

    def named(attributes: Any, kwargs: dict[str, Any]) -> object:
        return kwargs["message"] if isinstance(kwargs.get("message"), str) else message_of(attributes)

    def push_range(self: Any, attributes: Any = None, **kwargs: Any) -> Any:
        out = window.through(push, self, attributes, **kwargs)
        window.push(named(attributes, kwargs))
        return out

    def pop_range(self: Any) -> Any:
        window.pop()
        return window.through(pop, self)

    def start_range(self: Any, attributes: Any = None, **kwargs: Any) -> Any:
        rid = window.through(start, self, attributes, **kwargs)
        starts[rid] = window.start(named(attributes, kwargs))
        return rid

    def end_range(self: Any, rid: Any) -> Any:
        window.end(starts.pop(rid, 0))
        return window.through(end, self, rid)

    domain_cls.push_range, domain_cls.pop_range = push_range, pop_range
    domain_cls.start_range, domain_cls.end_range = start_range, end_range


def spec_of(steps: str, glob: str) -> WindowSpec:
    """The window of CaptureOptions' memory_steps and memory_range (checked by `trace run`; a bad
    value that reaches a traced process records the whole run's memory, never less)."""
    if glob:
        return WindowSpec(glob=glob)
    if steps:
        try:
            first, stop = parse_steps(steps)
        except ValueError:
            return WindowSpec()
        return WindowSpec(first=first, stop=stop)
    return WindowSpec()
