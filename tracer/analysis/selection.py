"""What a user selects in a trace must select something, or it is an error naming the closest NVTX
range names present: pair globs (a glob matching no range holding a kernel, or a glob pair forming
no pair, would let --fail-on-unordered pass having checked nothing), --range and --window (an
empty picture otherwise). Also the validated parsers of --range and --window."""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence

from tracer.errors import UsageError
from tracer.analysis.attribution import Attribution
from tracer.model.trace import Trace

MAX_SUGGESTIONS = 3


def range_names(trace: Trace, attr: Attribution) -> list[str]:
    """Names of the NVTX ranges kernels are attributed to, in first-seen order."""
    ids = dict.fromkeys(int(trace.ranges.text[r]) for r in attr.range_of_kernel if r >= 0)
    return list(dict.fromkeys(trace.strings[i] for i in ids))


def closest(glob: str, names: Sequence[str]) -> str:
    import difflib  # start-up: only a glob that matched nothing is looked up (issue 27)

    near = difflib.get_close_matches(glob, names, n=MAX_SUGGESTIONS, cutoff=0.0)
    return ", ".join(repr(n) for n in near) if near else "none: no GPU operation is inside an NVTX range"


def require_matches(trace: Trace, attr: Attribution, globs: Iterable[tuple[str, str]], formed: Sequence[object],
                    glob_regex: Callable[[str], re.Pattern[str]]) -> None:
    """Each glob must match a range holding a kernel, and each glob pair must form a pair
    (`formed`: the PairVerdicts found, with .producer and .consumer range names)."""
    names = range_names(trace, attr)
    for producer, consumer in globs:
        p_rx, c_rx = glob_regex(producer), glob_regex(consumer)
        for glob, rx in ((producer, p_rx), (consumer, c_rx)):
            if not any(rx.match(n) for n in names):
                raise UsageError(f"pair glob {glob!r} matches no NVTX range holding a GPU operation (kernel, copy or memset) "
                                 f"({len(names)} such names; closest: {closest(glob, names)})")
        if not any(p_rx.match(p.producer) and c_rx.match(p.consumer) for p in formed):  # type: ignore[attr-defined]  # formed is typed object: PairVerdicts, not imported here
            raise UsageError(f"pairs {producer}:{consumer} formed no pair: no {consumer!r} range follows a "
                             f"{producer!r} range with the same '*' parts, so nothing would be checked")


def parse_range(text: str | None, flag: str = "--range") -> str | None:
    """A regular expression over NVTX range names (None: no filter)."""
    if text is None:
        return None
    try:
        re.compile(text)
    except re.error as exc:
        raise UsageError(f"{flag} {text!r} is not a regular expression ({exc.msg} at position {exc.pos})") from None
    return text


UNITS_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
WINDOW_FORM = ("START:END with START < END, in microseconds from the first GPU operation or with a unit (ns, us, ms, s), "
               "e.g. 1000:5000 or 480ms:520ms; either side may be empty")


def parse_window(text: str | None) -> tuple[float, float] | None:
    """START:END from the first GPU operation, in microseconds or with a unit (480ms:520ms); either side
    may be empty (0, the end); both finite, START below END."""
    if text is None:
        return None
    parts = text.split(":")
    if len(parts) != 2:
        raise UsageError(f"--window {text!r} is not {WINDOW_FORM}")
    start, end = (_micros(text, p, default) for p, default in zip(parts, (0.0, math.inf)))
    if not start < end:
        raise UsageError(f"--window {text!r}: START must be below END ({WINDOW_FORM})")
    return start, end


def _micros(text: str, part: str, default: float) -> float:
    if not part.strip():
        return default
    m = re.fullmatch(r"\s*([-+0-9.eE]+|nan|inf)\s*(ns|us|µs|ms|s)?\s*", part, flags=re.IGNORECASE)
    try:
        value = float(m.group(1)) * UNITS_US[(m.group(2) or "us").lower()] if m else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"--window {text!r}: {part!r} is not a finite number of microseconds "
                         "or a time with a unit (ns, us, ms, s)")
    return value


def require_shown(trace: Trace, attr: Attribution, kernels_shown: int, range_regex: str | None,
                  window: tuple[float, float] | None) -> None:
    """A picture with no kernel is an error that says which selection emptied it."""
    if kernels_shown:
        return
    if range_regex is not None:
        names = range_names(trace, attr)
        raise UsageError(f"--range {range_regex!r} matches no NVTX range holding a kernel"
                         + (" in --window" if window else "") + f" (closest: {closest(range_regex, names)})")
    k = trace.kernels
    if window is not None and len(k):
        end = float(k.end.max() - k.start.min()) / 1e3
        raise UsageError(f"--window {window[0]:g}:{window[1]:g} holds no GPU operation (times are microseconds from the first "
                         f"GPU operation; the operations run from 0 to {end:.0f} us)")
    raise UsageError("the trace holds no kernel to draw")
