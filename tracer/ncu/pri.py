"""A .ncu-rep through NVIDIA's Python report interface (the `ncu-report` package, native libraries
included, no GPU needed). Imported lazily: tracer works without it, reading the CSV export instead."""
from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import Any

from tracer.errors import TraceFormatError
from tracer.ncu.container import inspect
from tracer.ncu.records import REGISTERS, SMS, STALL, Dim3, FIELDS, Launch, Metric, NcuReport, Source, build_launch

WANTED = set(FIELDS.values()) | {SMS, REGISTERS, "device__attribute_compute_capability_major",
                                  "device__attribute_compute_capability_minor"}


def load_module() -> ModuleType | None:
    try:
        return importlib.import_module("ncu_report")
    except ImportError:  # not installed, or its native library does not load here
        return None


def reader_version() -> str | None:
    try:
        return version("ncu-report")
    except PackageNotFoundError:
        return None


def read_rep(path: Path, mod: ModuleType) -> NcuReport:
    facts = inspect(path)  # magic, whole file, version: before the native reader sees it
    reader = reader_version()
    try:
        ctx = mod.load_report(str(path))
        launches = tuple(_launch(action, n) for n, action in enumerate(_actions(ctx)))
    except (RuntimeError, ValueError, OSError) as exc:
        raise TraceFormatError(f"{path}: ncu-report {reader} cannot read this report made by ncu "
                               f"{facts.ncu_version or '(version unknown)'}: {exc}") from None
    if not launches:
        raise TraceFormatError(f"{path}: no kernel results in the report (made by ncu {facts.ncu_version or '?'}, "
                               f"read by ncu-report {reader})")
    notes = () if not facts.ncu_version or not reader or facts.ncu_version.startswith(reader) else (
        f"made by ncu {facts.ncu_version}, read by ncu-report {reader}",)
    return NcuReport(path=str(path), source=Source.NCU_REPORT, launches=launches, ncu_version=facts.ncu_version, reader_version=reader,
                     clock_control=facts.clock_control,
                     nvtx_known=True, notes=notes)


def _actions(ctx: Any) -> list[Any]:
    return [ctx.range_by_idx(r).action_by_idx(a) for r in range(ctx.num_ranges())
            for a in range(ctx.range_by_idx(r).num_actions())]


def _launch(action: Any, n: int) -> Launch:
    metrics: dict[str, Metric] = {}
    for name in action.metric_names():
        if name in WANTED or STALL.fullmatch(name):
            m = action.metric_by_name(name)
            value = m.value() if m is not None and m.has_value() else None
            metrics[name] = Metric(float(value) if isinstance(value, (int, float)) else None, m.unit() if m else "")
    ident = action.metric_by_name("ID")
    return build_launch(int(ident.value()) if ident is not None else n, action.name(action.NameBase_DEMANGLED),
                        _nvtx(action), _dim3(action, "launch__grid_dim"), _dim3(action, "launch__block_dim"), metrics)


def _dim3(action: Any, prefix: str) -> Dim3 | None:
    ms = [action.metric_by_name(f"{prefix}_{axis}") for axis in "xyz"]
    if any(m is None or not m.has_value() for m in ms):
        return None
    return int(ms[0].value()), int(ms[1].value()), int(ms[2].value())


def _nvtx(action: Any) -> tuple[str, ...]:
    """Open push/pop ranges, then start/end ranges, per domain: "domain@name" ("name" in the default domain)."""
    state = action.nvtx_state()
    if state is None:
        return ()
    out: list[str] = []
    for dom_id in state.domains():
        dom = state.domain_by_id(dom_id)
        prefix = "" if dom.name() in ("", "<default domain>") else f"{dom.name()}@"
        out += [prefix + r for r in list(dom.push_pop_ranges()) + list(dom.start_end_ranges())]
    return tuple(out)
