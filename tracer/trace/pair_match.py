"""Pair specs that check nothing are errors, not passes: a glob that matches no NVTX range holding
a kernel, or a producer/consumer glob pair that forms no pair, is refused with the closest range
names present (a --fail-on-unordered run would otherwise pass having checked nothing)."""
from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence

from tracer.errors import UsageError
from tracer.trace.attribution import Attribution
from tracer.trace.model import Trace

MAX_SUGGESTIONS = 3


def range_names(trace: Trace, attr: Attribution) -> list[str]:
    """Names of the NVTX ranges kernels are attributed to, in first-seen order."""
    ids = dict.fromkeys(int(trace.ranges.text[r]) for r in attr.range_of_kernel if r >= 0)
    return list(dict.fromkeys(trace.strings[i] for i in ids))


def closest(glob: str, names: Sequence[str]) -> str:
    near = difflib.get_close_matches(glob, names, n=MAX_SUGGESTIONS, cutoff=0.0)
    return ", ".join(repr(n) for n in near) if near else "none: no kernel is inside an NVTX range"


def require_matches(trace: Trace, attr: Attribution, globs: Iterable[tuple[str, str]], formed: Sequence[object],
                    glob_regex: Callable[[str], re.Pattern[str]]) -> None:
    """Each glob must match a range holding a kernel, and each glob pair must form a pair
    (`formed`: the PairVerdicts found, with .producer and .consumer range names)."""
    names = range_names(trace, attr)
    for producer, consumer in globs:
        p_rx, c_rx = glob_regex(producer), glob_regex(consumer)
        for glob, rx in ((producer, p_rx), (consumer, c_rx)):
            if not any(rx.match(n) for n in names):
                raise UsageError(f"pair glob {glob!r} matches no NVTX range holding a kernel "
                                 f"({len(names)} such names; closest: {closest(glob, names)})")
        if not any(p_rx.match(p.producer) and c_rx.match(p.consumer) for p in formed):  # type: ignore[attr-defined]
            raise UsageError(f"pairs {producer}:{consumer} formed no pair: no {consumer!r} range follows a "
                             f"{producer!r} range with the same '*' parts, so nothing would be checked")
