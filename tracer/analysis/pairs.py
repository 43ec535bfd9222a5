"""Which producer -> consumer pairs an analysis judges: none, every kernel against the other streams
(`all`), or NVTX range globs. The structured form is what verdict.json stores as `pair_spec`."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from tracer.errors import TraceFormatError, UsageError

GlobPair = tuple[str, str]


class PairMode(str, Enum):
    NONE = "none"
    ALL = "all"
    GLOBS = "globs"


@dataclass(frozen=True)
class PairSpec:
    mode: PairMode
    globs: tuple[GlobPair, ...] = ()
    implicit: bool = field(default=False, compare=False)  # nothing was asked: `all` unless memory hazards judge instead

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", PairMode(self.mode))  # "all" and PairMode.ALL alike
        if (self.mode is PairMode.GLOBS) != bool(self.globs):
            raise ValueError(f"PairSpec({self.mode.value}) with globs {self.globs!r}")

    @classmethod
    def of(cls, globs: Iterable[GlobPair]) -> PairSpec:
        """Glob pairs, or mode none when there are none."""
        pairs = tuple((str(p), str(c)) for p, c in globs)
        return cls(PairMode.GLOBS, pairs) if pairs else cls(PairMode.NONE)

    @classmethod
    def coerce(cls, pairs: PairSpec | Sequence[GlobPair] | None, all_kernel_pairs: bool = False) -> PairSpec:
        """What `analyze()` accepts: a PairSpec, or the older (glob pairs, all flag) arguments."""
        if isinstance(pairs, PairSpec):
            return pairs
        return cls(PairMode.ALL) if all_kernel_pairs else cls.of(pairs or ())

    @classmethod
    def from_args(cls, pairs: Sequence[str] | None, producers: Sequence[str] | None = None,
                  consumers: Sequence[str] | None = None, default: PairSpec | None = None) -> PairSpec:
        """`--pairs` values ('all' or P:C) and `--producer P --consumer C` options, matched in order;
        nothing given: `default`, else all."""
        producers, consumers = list(producers or ()), list(consumers or ())
        if len(producers) != len(consumers):
            raise UsageError(f"--producer given {len(producers)} time(s) and --consumer {len(consumers)}: "
                             "give them in pairs, e.g. --producer 'aten::mm' --consumer '*/dgrad'")
        globs = [(p, c) for p, c in zip(producers, consumers)]
        if not pairs and not globs:
            return default if default is not None and default.mode is not PairMode.NONE else cls(PairMode.ALL, implicit=True)
        if pairs and "all" in pairs:
            if len(pairs) > 1 or globs:
                raise UsageError("--pairs all checks every pair: give it alone, without other --pairs or --producer")
            return cls(PairMode.ALL)
        return cls.of([parse_pair(p) for p in pairs or ()] + globs)

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode.value, "globs": [list(g) for g in self.globs]}

    @classmethod
    def from_json(cls, value: object) -> PairSpec:
        """The structured form, or the joined string older run directories stored ('all', 'none',
        'P:C, P2:C2'). Anything else is a bad input file (TraceFormatError, exit 6)."""
        try:
            if isinstance(value, str):
                if value in ("all", "none", ""):
                    return cls(PairMode(value or "none"))
                return cls.of(parse_pair(s.strip()) for s in value.split(", "))
            if isinstance(value, dict) and value.get("mode") in [m.value for m in PairMode]:
                globs = value.get("globs") or []
                if isinstance(globs, list) and all(isinstance(g, list) and len(g) == 2 and all(isinstance(x, str) for x in g)
                                                   for g in globs):
                    mode = PairMode(value["mode"])
                    return cls.of(tuple(g) for g in globs) if mode is PairMode.GLOBS else cls(mode)
        except (UsageError, ValueError):
            pass
        raise TraceFormatError(f"pair_spec {str(value)[:80]!r} is not 'none', 'all', old 'P:C, ...' or "
                               "{'mode': 'none'|'all'|'globs', 'globs': [[P, C], ...]}")

    def __str__(self) -> str:
        if self.mode is PairMode.GLOBS:
            return ", ".join(f"{p} -> {c}" for p, c in self.globs)
        return str(self.mode.value)


def parse_pair(spec: str) -> GlobPair:
    """PRODUCER_GLOB:CONSUMER_GLOB (names with '::' need --producer/--consumer)."""
    if spec.count(":") != 1 or not all(spec.split(":")):
        raise UsageError(f"--pairs {spec!r} is not 'all' or PRODUCER_GLOB:CONSUMER_GLOB, e.g. '*/cast_transpose:*/dgrad' "
                         "(names with '::' go in --producer GLOB --consumer GLOB)")
    a, b = spec.split(":")
    return a, b
