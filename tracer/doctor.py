"""What tracer needs, found or not, looked up exactly as the commands look it up (the same
constants and finders), with versions, what needs each item, and advice for a first use."""
from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tracer import proc
from tracer.errors import TracerError
from tracer.gpu import NO_GPU_ADVICE

REINSTALL = "reinstall tracer (pip install tracer-nsight: its wheel ships the kernel sources and profiles)"


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    found: bool
    version: str  # version, path or count when found
    hint: str  # why not and how to get it when not found
    needed_by: str  # the commands that use it
    required: bool  # every install needs it (doctor exits 5 without it); else only some machines

    @property
    def missing_required(self) -> bool:
        return self.required and not self.found


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]
    advice: tuple[str, ...]

    def get(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    @property
    def ok(self) -> bool:
        return not any(c.missing_required for c in self.checks)

    def to_json(self) -> dict[str, object]:
        from tracer.schemas import header

        return {**header("doctor"), "ok": self.ok, "checks": [asdict(c) for c in self.checks], "advice": list(self.advice)}


def _probe(name: str, needed_by: str, required: bool, find: Callable[[], str]) -> Check:
    """find() returns what was found; a TracerError or a broken library is a finding, not a crash."""
    try:
        return Check(name=name, found=True, version=find(), hint="", needed_by=needed_by, required=required)
    except (TracerError, ImportError, OSError, RuntimeError) as exc:
        return Check(name=name, found=False, version="", hint=str(exc), needed_by=needed_by, required=required)


def _pkg(name: str) -> str:
    return importlib.metadata.version(name)  # PackageNotFoundError is an ImportError


def tool_version(path: str, flag: str = "--version") -> str:
    try:
        res = proc.capture([path, flag], timeout=60)
    except Exception as exc:  # a broken binary is a finding, not a crash
        return f"{path}: unusable ({exc})"
    text = (res.stdout + res.stderr).strip().splitlines()
    return f"{path}: {text[-1].strip() if text else f'exit {res.returncode}'}"


def _nonempty(what: str, names: list[str], folder: Path) -> str:
    if not names:
        raise FileNotFoundError(f"no {what} in {folder}: {REINSTALL}")
    return f"{len(names)} in {folder}"


def check_files() -> list[Check]:
    """The kernel sources, profiles, suppressions and demo data, through the constants the commands read."""
    from tracer.campaign.grid import CAMPAIGN_DIR
    from tracer.kernel import compile as nvrtc_compile
    from tracer.workloads.profiles import PROFILE_DIR, builtin_names
    from tracer.resources import DEMO_DIR
    from tracer.sanitize.suppress import DEFAULT_FILE

    def kernel() -> str:
        nvrtc_compile.kernel_source()
        return str(nvrtc_compile.KERNEL_DIR / nvrtc_compile.KERNEL_FILE)

    def suppressions() -> str:
        if not DEFAULT_FILE.is_file():
            raise FileNotFoundError(f"{DEFAULT_FILE} not found: {REINSTALL}")
        return str(DEFAULT_FILE)

    return [
        _probe("kernel sources", "kernels, run, trace run, sanitize run, campaign", True, kernel),
        _probe("workload profiles", "run, trace run, sanitize run", True,
               lambda: _nonempty("workload profiles", builtin_names(), PROFILE_DIR)),
        _probe("campaign profiles", "campaign run", True,
               lambda: _nonempty("campaign profiles", builtin_names(CAMPAIGN_DIR), CAMPAIGN_DIR)),
        _probe("default suppressions", "sanitize run, sanitize import", True, suppressions),
        _probe("demo data", "demo, quickstart without a GPU", True,
               lambda: _nonempty("demo files", sorted(p.name for p in DEMO_DIR.glob("*")), DEMO_DIR)),
    ]


def check_gpu() -> list[Check]:
    """torch's view (what `run` asks) and the driver's (what captures ask, through tracer.gpu)."""
    from tracer import gpu
    from tracer.errors import NoGpuError

    def torch_gpu() -> str:
        import torch

        if not torch.cuda.is_available():
            raise NoGpuError("torch.cuda.is_available() is False")
        p = torch.cuda.get_device_properties(0)
        return f"{p.name}, sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, torch CUDA {torch.version.cuda}"

    def driver_gpu() -> str:
        found = gpu.probe()
        if not found.devices:
            raise NoGpuError(found.detail)
        return f"{found.devices} device(s), {found.detail}"

    return [
        _probe("torch", "run, campaign", True, lambda: __import__("torch").__version__),
        _probe("GPU (torch)", "run --device cuda", False, torch_gpu),
        _probe("GPU (driver)", "trace run, sanitize run", False, driver_gpu),
    ]


def check_libraries() -> list[Check]:
    from tracer.capture.cupti import find_libcupti, require_cupti_python
    from tracer.kernel.compile import nvrtc_version

    def cuda_core() -> str:
        from tracer.kernel.cudacore import cuda_core as import_cuda_core

        import_cuda_core()  # the import `kernels`/`run` do; a broken install fails here

        return _pkg("cuda-core")

    def cupti_python() -> str:
        require_cupti_python()
        return _pkg("cupti-python")

    return [
        _probe("NVRTC", "kernels, run", True, nvrtc_version),
        _probe("cuda-core", "kernels sass/diff, run", True, cuda_core),
        _probe("nvtx", "run (NVTX ranges)", True, lambda: _pkg("nvtx")),
        _probe("cupti-python", "trace run --backend cupti", False, cupti_python),
        _probe("libcupti", "trace run --backend cupti", False, find_libcupti),
    ]


def check_tools() -> list[Check]:
    from tracer.capture.nsys import find_nsys, importer_status
    from tracer.errors import ToolMissingError
    from tracer.kernel.disasm import find_tool
    from tracer.sanitize.runner import find_sanitizer
    from tracer.sanitize.tools import tool_names

    def found(path: str | None, hint: str) -> str:
        if path is None:
            raise ToolMissingError(hint)
        return tool_version(path)

    def nsys_reports() -> str:
        ok, detail = importer_status()
        if not ok:
            raise ToolMissingError(detail)
        return detail

    return [
        _probe("nvdisasm", "kernels sass/diff", True, lambda: tool_version(find_tool("nvdisasm"))),
        _probe("cuobjdump", "kernels sass/diff", True, lambda: tool_version(find_tool("cuobjdump"))),
        _probe("compute-sanitizer", f"sanitize run ({', '.join(tool_names())})", False, lambda: tool_version(find_sanitizer())),
        _probe("nsys", "trace run --backend nsys", False,
               lambda: found(find_nsys(), "nsys not found: install Nsight Systems, or set TRACER_NSYS")),
        _probe("nsys can write reports", "trace run --backend nsys", False, nsys_reports),
    ]


def check_ncu() -> list[Check]:
    """ncu and the ncu-report reader, as `tracer profile` finds them (TRACER_NCU, PATH, the usual folders)."""
    from tracer.ncu.tool import ncu_status

    ncu, reader = ncu_status()
    return [Check(name="ncu", found=ncu.found, version=ncu.version, hint=ncu.hint, needed_by="profile (Nsight Compute)", required=False),
            Check(name="ncu-report", found=reader.found, version=reader.version, hint=reader.hint,
                  needed_by="profile import/compare of .ncu-rep files", required=False)]


def advise(checks: list[Check]) -> tuple[str, ...]:
    by = {c.name: c for c in checks}
    missing = [c.name for c in checks if c.missing_required]
    out = [f"missing {', '.join(missing)}: {REINSTALL}"] if missing else []
    if not (by["GPU (torch)"].found and by["GPU (driver)"].found):
        out.append(f"no GPU: {NO_GPU_ADVICE}; analysis of existing captures (trace analyze, sanitize import, "
                   "plot, report) needs neither a GPU nor Nsight tools")
        return tuple(out)
    if not (by["cupti-python"].found and by["libcupti"].found) and not by["nsys can write reports"].found:
        out.append("trace run needs cupti-python (pip install 'tracer-nsight[cupti]') or a full Nsight Systems")
    writer = by["nsys can write reports"]
    if by["nsys"].found and not writer.found and "libdw" in writer.hint:
        out.append("trace run --backend nsys: its QdstrmImporter lacks elfutils; `tracer doctor --fix-nsys` supplies it "
                   "(from drgn: pip install 'tracer-nsight[nsys]', or --from drgn-*.whl)")
    if not by["compute-sanitizer"].found:
        out.append("sanitize run needs compute-sanitizer (it ships with the CUDA toolkit)")
    return tuple(out)


def run_checks() -> Report:
    checks = check_files() + check_gpu() + check_libraries() + check_tools() + check_ncu()
    return Report(tuple(checks), advise(checks))


def format_text(report: Report) -> str:
    lines = []
    for c in report.checks:
        what = c.version if c.found else f"not found (needed by {c.needed_by}): {c.hint}"
        lines.append(f"{'ok' if c.found else '--'}  {c.name:<24} {what}")
    lines += ["", "advice:", *(f"  {a}" for a in report.advice)] if report.advice else []
    return "\n".join(lines)
