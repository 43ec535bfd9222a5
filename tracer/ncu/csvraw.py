"""`ncu --import FILE --csv --page raw` output -> launches: one row per launch, the unit row second,
numbers as ncu prints them for its locale ("1,980,000", "84,926.30", "0,36", "1.980.000,5")."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from tracer.errors import TraceFormatError
from tracer.ncu.records import Dim3, Launch, Metric, NcuReport, Source, build_launch
from tracer.store.inputs import MB, read_limited

CSV_LIMIT = 256 * MB  # read whole: larger exports are refused in one line (split them with ncu --launch-count)
CELL_LIMIT = 1 * MB  # csv's default of 131,072 characters; a demangled template name can pass it
MAX_LAUNCH_ID = (1 << 53) - 1  # exact in the float ncu's numbers are read as

NOT_A_NUMBER = {"", "n/a", "no data", "-", "nan"}
IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC")
_EN_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")
_DE_GROUPED = re.compile(r"[+-]?\d{1,3}(\.\d{3})+(,\d+)?")
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")
_SPACES = re.compile(r"[\s\u00a0\u202f\u2009']")  # grouping by (thin, no-break) spaces or apostrophes
_DIM3 = re.compile(r"\(\s*(\d[\d,.]*)\s*,\s*(\d[\d,.]*)\s*,\s*(\d[\d,.]*)\s*\)")


def parse_number(text: str) -> float | None:
    """A number as ncu prints it, None for ncu's "n/a" / "no data"; ValueError for anything else.
    "1,850" is read as 1850 (ncu groups integers by thousands; a decimal comma has 1, 2 or 4+ digits)."""
    if text.strip().lower() in NOT_A_NUMBER:
        return None
    s = _SPACES.sub("", text.strip())
    if _EN_GROUPED.fullmatch(s):
        s = s.replace(",", "")
    elif _DE_GROUPED.fullmatch(s) and (s.count(".") > 1 or "," in s):
        s = s.replace(".", "").replace(",", ".")
    elif _DECIMAL_COMMA.fullmatch(s):
        s = s.replace(",", ".")
    return float(s)


def parse_dim3(text: str) -> Dim3 | None:
    m = _DIM3.fullmatch(text.strip())
    if not m:
        return None
    return tuple(int(parse_number(g) or 0) for g in m.groups())  # type: ignore[return-value]  # the pattern has exactly three groups, so this is a Dim3


def read_csv(path: Path) -> NcuReport:
    raw = read_limited(path, CSV_LIMIT, "an ncu CSV export")
    try:
        text = raw.decode("utf-8-sig", errors="strict")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc})") from None
    launches, notes = parse_raw_csv(text, str(path))
    return NcuReport(path=str(path), source=Source.CSV, launches=launches, nvtx_known=any(n.startswith("NVTX") for n in notes),
                     notes=tuple(n for n in notes if not n.startswith("NVTX")))


def _rows(text: str, where: str) -> list[list[str]]:
    """The CSV's non-empty rows; a cell over CELL_LIMIT characters or a broken quote is one error."""
    reader = csv.reader(io.StringIO(text))
    old = csv.field_size_limit(CELL_LIMIT)
    try:
        return [r for r in reader if r]
    except csv.Error as exc:
        raise TraceFormatError(f"{where}: line {reader.line_num}: not CSV ncu writes ({exc}; "
                               f"a cell may hold at most {CELL_LIMIT:,} characters)") from None
    finally:
        csv.field_size_limit(old)


def parse_raw_csv(text: str, where: str = "<csv>") -> tuple[tuple[Launch, ...], list[str]]:
    rows = _rows(text, where)
    start = next((i for i, r in enumerate(rows) if r[:1] == ["ID"] and "Kernel Name" in r), None)
    if start is None:
        raise TraceFormatError(f"{where}: not an `ncu --csv --page raw` export (no header row starting with "
                               f"\"ID\" and naming \"Kernel Name\")")
    header = rows[start]
    if "Metric Name" in header:
        raise TraceFormatError(f"{where}: a `--page details` export (one row per metric); export with "
                               f"`ncu --import FILE.ncu-rep --csv --page raw`")
    body = rows[start + 1:]
    units = body.pop(0) if body and body[0][:1] == [""] else None
    if units is None:
        raise TraceFormatError(f"{where}: no unit row after the header (the second row of a raw export); "
                               f"durations cannot be read without it")
    if not body:
        raise TraceFormatError(f"{where}: no launches (the export has a header and units but no rows)")
    repeated = sorted({h for h in header if header.count(h) > 1}) if len(set(header)) != len(header) else []
    if repeated:
        raise TraceFormatError(f"{where}: column {repeated[0][:80]!r} appears {header.count(repeated[0])} times in the header "
                               "(ncu names each metric once; which one holds the value is ambiguous)")
    nvtx_cols = [i for i, h in enumerate(header) if h.lower().startswith(("nvtx", "thread_domain"))]
    notes = ["NVTX columns: " + ", ".join(header[i] for i in nvtx_cols)] if nvtx_cols else []
    launches = tuple(_launch(header, units, row, n + start + 3, where, nvtx_cols) for n, row in enumerate(body))
    seen: set[int] = set()
    for n, launch in enumerate(launches):
        if launch.id in seen:
            raise TraceFormatError(f"{where}: row {n + start + 3}: launch ID {launch.id} is given twice (ncu numbers each "
                                   "launch once: rows repeated by an edit or a merge)")
        seen.add(launch.id)
    return launches, notes


def _launch(header: list[str], units: list[str], row: list[str], line: int, where: str, nvtx_cols: list[int]) -> Launch:
    if len(row) != len(header):
        raise TraceFormatError(f"{where}: row {line} has {len(row)} cells, the header {len(header)} (truncated export?)")
    cells = dict(zip(header, row))
    launch_id = _launch_id(cells["ID"], line, where)
    metrics = {}
    for h, u, v in zip(header, units, row):
        if h in IDENTITY:
            continue
        try:
            metrics[h] = Metric(parse_number(v), u)
        except ValueError:
            continue  # a string-valued metric (e.g. launch__func_cache_config): never one tracer reads
    nvtx = tuple(row[i] for i in nvtx_cols if row[i])
    try:
        grid, block = parse_dim3(cells["Grid Size"]), parse_dim3(cells["Block Size"])
    except OverflowError:
        raise TraceFormatError(f"{where}: row {line}: grid {cells['Grid Size'][:40]!r} or block "
                               f"{cells['Block Size'][:40]!r} is out of range") from None
    return build_launch(launch_id, cells["Kernel Name"], nvtx, grid, block, metrics)


def _launch_id(text: str, line: int, where: str) -> int:
    """ncu numbers launches 0, 1, 2...: anything else (inf, 1e999, nan, -1, 2.5) is refused."""
    try:
        value = parse_number(text)
    except ValueError:
        value = None
    if value is None or not (0 <= value <= MAX_LAUNCH_ID) or not float(value).is_integer():
        raise TraceFormatError(f"{where}: row {line}: launch ID {text[:40]!r} is not a number from 0 to {MAX_LAUNCH_ID:,} "
                               "(ncu numbers launches 0, 1, 2...)")
    return int(value)
