"""Frozen per-launch records read from an Nsight Compute report, and the metric names behind them."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

DURATION = "gpu__time_duration.sum"
DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"  # SpeedOfLight "DRAM Throughput"
L2_PCT = "lts__throughput.avg.pct_of_peak_sustained_elapsed"  # SpeedOfLight "L2 Cache Throughput"
OCCUPANCY_PCT = "sm__warps_active.avg.pct_of_peak_sustained_active"  # Occupancy "Achieved Occupancy"
ISSUED_IPC = "sm__inst_issued.avg.per_cycle_active"  # ComputeWorkloadAnalysis "Issued Ipc Active"
CYCLES_PER_ISSUE = "smsp__average_warp_latency_per_inst_issued.ratio"  # WarpStateStats "Warp Cycles Per Issued Instruction"
SMS = "launch__sm_count"
REGISTERS = "launch__registers_per_thread"
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")
MEMBAR = "membar"  # the memory-barrier stall: warps waiting at a fence (MEMBAR) for their stores to be visible
# Collected with --metrics on top of the sections: the default sections do not carry issued IPC.
EXTRA_METRICS = (ISSUED_IPC,)
TIME_UNITS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
FIELDS = {"duration_ns": DURATION, "dram_pct": DRAM_PCT, "l2_pct": L2_PCT, "occupancy_pct": OCCUPANCY_PCT,
          "ipc": ISSUED_IPC, "cycles_per_issue": CYCLES_PER_ISSUE}


class Source(str, Enum):
    NCU_REPORT = "ncu-report"  # the .ncu-rep through NVIDIA's Python report interface
    CSV = "csv"  # `ncu --import FILE --csv --page raw`


Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class Metric:
    """One metric value as a report gives it: a number (None when the report says n/a) and its unit."""

    value: float | None
    unit: str


@dataclass(frozen=True, kw_only=True)
class Launch:
    """One profiled kernel launch. None: the report did not have it (the name is in `missing`)."""

    id: int
    name: str
    nvtx: tuple[str, ...]  # open NVTX ranges, outermost first: "domain@name", or "name" in the default domain
    grid: Dim3 | None
    block: Dim3 | None
    duration_ns: float | None
    dram_pct: float | None
    l2_pct: float | None
    occupancy_pct: float | None
    ipc: float | None
    cycles_per_issue: float | None
    stalls: tuple[tuple[str, float], ...]  # reason -> warp cycles stalled per issued instruction, by name
    cc: str | None = None  # compute capability, e.g. "9.0"
    sms: int | None = None
    registers: int | None = None  # per thread, as launched
    missing: tuple[str, ...] = field(default_factory=tuple)

    @property
    def nvtx_leaf(self) -> str | None:
        """The innermost open range's name, without its domain."""
        return self.nvtx[-1].split("@", 1)[-1] if self.nvtx else None

    def shares(self) -> dict[str, float]:
        """Each stall reason's share of all stall reasons (they sum to 1); empty when none were read."""
        total = sum(v for _, v in self.stalls)
        return {r: v / total for r, v in self.stalls} if total > 0 else {}

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.update(nvtx=list(self.nvtx), grid=list(self.grid) if self.grid else None,
                 block=list(self.block) if self.block else None, stalls=dict(self.stalls), missing=list(self.missing))
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Launch:
        dims = {k: tuple(int(x) for x in d[k]) if d.get(k) else None for k in ("grid", "block")}
        return Launch(id=int(d["id"]), name=str(d["name"]), nvtx=tuple(d["nvtx"]), grid=dims["grid"], block=dims["block"],  # type: ignore[arg-type]  # grid and block are Dim3 tuples built just above
                      **{k: _opt(d.get(k)) for k in FIELDS}, stalls=tuple(sorted((str(r), float(v)) for r, v in d["stalls"].items())),
                      cc=d.get("cc"), sms=d.get("sms"), registers=d.get("registers"), missing=tuple(d.get("missing", ())))


@dataclass(frozen=True, kw_only=True)
class NcuReport:
    """What one report holds: its launches and what is known about how it was made."""

    path: str
    source: Source
    launches: tuple[Launch, ...]
    ncu_version: str | None = None  # the ncu that wrote the report, when the file says
    reader_version: str | None = None  # the ncu-report package that read it
    clock_control: str | None = None  # from the command line stored in the report, when it is there
    nvtx_known: bool = True  # False: the input cannot carry NVTX state (then `nvtx` is empty, not "outside any range")
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "source": self.source.value, "ncu_version": self.ncu_version,
                "reader_version": self.reader_version, "clock_control": self.clock_control,
                "nvtx_known": self.nvtx_known, "notes": list(self.notes),
                "launches": [launch.to_json() for launch in self.launches]}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> NcuReport:
        return NcuReport(path=str(d["path"]), source=Source(d["source"]), launches=tuple(Launch.from_json(x) for x in d["launches"]),
                         ncu_version=d.get("ncu_version"), reader_version=d.get("reader_version"), clock_control=d.get("clock_control"),
                         nvtx_known=bool(d.get("nvtx_known", True)), notes=tuple(d.get("notes", ())))


def _opt(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]  # float() of a report value: a bad one raises, as it should


def build_launch(id_: int, name: str, nvtx: tuple[str, ...], grid: Dim3 | None, block: Dim3 | None,
                 metrics: Mapping[str, Metric]) -> Launch:
    """A Launch from the metrics of one result, whichever reader found them (one rule for both)."""
    values: dict[str, float | None] = {}
    missing = [] if grid else ["grid"]
    missing += [] if block else ["block"]
    for fld, metric in FIELDS.items():
        m = metrics.get(metric)
        value = None if m is None else m.value
        if fld == "duration_ns" and m is not None and value is not None:
            scale = TIME_UNITS.get(m.unit)
            value = None if scale is None else value * scale
        values[fld] = value
        if value is None:
            missing.append(metric if m is None or fld != "duration_ns" else f"{metric} (unit {m.unit!r})")
    stalls = tuple(sorted((STALL.fullmatch(k).group(1), m.value) for k, m in metrics.items()  # type: ignore[union-attr]  # the generator's filter keeps only names STALL fully matches
                          if STALL.fullmatch(k) and m.value is not None))
    if not stalls:
        missing.append("smsp__average_warps_issue_stalled_*_per_issue_active.ratio (WarpStateStats)")
    return Launch(id=id_, name=name, nvtx=nvtx, grid=grid, block=block, stalls=stalls, cc=compute_capability(metrics), sms=_int(metrics, SMS),
                  registers=_int(metrics, REGISTERS), missing=tuple(missing), **values)


def _int(metrics: Mapping[str, Metric], name: str) -> int | None:
    m = metrics.get(name)
    return None if m is None or m.value is None else int(m.value)


def compute_capability(metrics: Mapping[str, Metric]) -> str | None:
    major = metrics.get("device__attribute_compute_capability_major")
    minor = metrics.get("device__attribute_compute_capability_minor")
    if major is None or minor is None or major.value is None or minor.value is None:
        return None
    return f"{int(major.value)}.{int(minor.value)}"
