"""Read an Nsight Compute report into frozen launch records: a .ncu-rep through the ncu-report
package, else the `--csv --page raw` export beside it (FILE.raw.csv), or a CSV given directly.
Pure and CPU-only: no process is started, no GPU is needed."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tracer.errors import ToolMissingError, TraceFormatError
from tracer.ncu import pri
from tracer.ncu.container import inspect
from tracer.ncu.csvraw import read_csv
from tracer.ncu.records import NcuReport

INSTALL_READER = "pip install ncu-report (or tracer-nsight[ncu])"


def csv_beside(report: Path) -> Path:
    """Where `tracer profile` writes the raw CSV export of REPORT.ncu-rep."""
    return report.with_name(report.name.removesuffix(".ncu-rep") + ".raw.csv")


def read_report(path: Path, prefer_csv: bool = False) -> NcuReport:
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file (expected a .ncu-rep or an `ncu --csv --page raw` export)")
    if path.suffix == ".csv":
        return read_csv(path)
    if path.suffix != ".ncu-rep":
        raise TraceFormatError(f"{path}: unknown report type {path.suffix!r} (allowed: .ncu-rep, .csv)")
    mod = None if prefer_csv else pri.load_module()
    if mod is not None:
        return pri.read_rep(path, mod)
    return _from_csv_export(path)


def _from_csv_export(path: Path) -> NcuReport:
    facts = inspect(path)  # a truncated report is an error even when its CSV export is whole
    export = csv_beside(path)
    if not export.is_file():
        raise ToolMissingError(f"{path}: reading a .ncu-rep needs NVIDIA's report reader: {INSTALL_READER}; or, where "
                               f"ncu is, export it: ncu --import {path.name} --csv --page raw > {export.name}")
    report = read_csv(export)
    note = "read from the CSV export beside the report (ncu-report is not installed)" + (
        "" if report.nvtx_known else "; the export carries no NVTX paths")
    return replace(report, ncu_version=facts.ncu_version, clock_control=facts.clock_control,
                   notes=report.notes + (note,))
