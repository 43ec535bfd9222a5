"""`tracer doctor`: what tracer needs, found or not, with versions and how to get what is missing."""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
from dataclasses import asdict, dataclass

from tracer import proc


@dataclass(frozen=True)
class Finding:
    name: str
    found: bool
    version: str
    hint: str


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check the GPU, driver, CUDA, torch, NVRTC, CUPTI and the Nsight tools")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_doctor)


def _pkg(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _tool_version(path: str, flag: str = "--version") -> str:
    try:
        res = proc.capture([path, flag], timeout=60)
    except Exception as exc:  # a broken binary is a finding, not a crash
        return f"unusable ({exc})"
    text = (res.stdout + res.stderr).strip().splitlines()
    return text[-1].strip() if text else f"exit {res.returncode}"


def check_gpu() -> list[Finding]:
    try:
        import torch
    except ImportError:
        return [Finding("torch", False, "", "pip install torch")]
    out = [Finding("torch", True, torch.__version__, "")]
    if not torch.cuda.is_available():
        out.append(Finding("GPU", False, "", "no CUDA GPU visible: trace/sanitize/run need one; `tracer demo` works without"))
        return out
    props = torch.cuda.get_device_properties(0)
    out.append(Finding("GPU", True, f"{props.name}, sm_{props.major}{props.minor}, {props.multi_processor_count} SMs", ""))
    out.append(Finding("CUDA runtime (torch)", True, str(torch.version.cuda), ""))
    try:
        from cuda.bindings import driver

        _, v = driver.cuDriverGetVersion()
        out.append(Finding("driver (CUDA API)", True, f"{v // 1000}.{v % 1000 // 10}", ""))
    except Exception as exc:  # reported, not raised: doctor lists what is wrong
        out.append(Finding("driver (CUDA API)", False, "", f"cuda-python could not query the driver: {exc}"))
    return out


def check_libraries() -> list[Finding]:
    from tracer.kernel.compile import nvrtc_version

    out = []
    try:
        out.append(Finding("NVRTC", True, nvrtc_version(), ""))
    except Exception as exc:  # reported, not raised
        out.append(Finding("NVRTC", False, "", f"pip install cuda-python nvidia-cuda-nvrtc ({exc})"))
    for pkg, hint in (("cuda-core", "pip install cuda-core"), ("nvtx", "pip install nvtx"),
                      ("cupti-python", "pip install cupti-python (needed by `tracer trace run --backend cupti`)")):
        v = _pkg(pkg)
        out.append(Finding(pkg, v is not None, v or "", "" if v else hint))
    return out


def check_tools() -> list[Finding]:
    from tracer.kernel.disasm import find_tool
    from tracer.errors import ToolMissingError

    out = []
    for name in ("nvdisasm", "cuobjdump"):
        try:
            out.append(Finding(name, True, _tool_version(find_tool(name)), ""))
        except ToolMissingError as exc:
            out.append(Finding(name, False, "", str(exc)))
    for name, hint in (("compute-sanitizer", "install the CUDA toolkit (compute-sanitizer ships with it)"),
                       ("ncu", "install Nsight Compute"), ("nsys", "install Nsight Systems")):
        path = shutil.which(name)
        out.append(Finding(name, path is not None, _tool_version(path) if path else "", "" if path else hint))
    out.append(nsys_report_finding())
    return out


def nsys_report_finding() -> Finding:
    from tracer.capture.nsys import importer_status

    ok, detail = importer_status()
    return Finding("nsys can write reports", ok, detail if ok else "", "" if ok else detail)


def cmd_doctor(args: argparse.Namespace) -> int:
    findings = check_gpu() + check_libraries() + check_tools()
    if args.json:
        print(json.dumps([asdict(f) for f in findings], indent=1))
        return 0
    for f in findings:
        mark = "ok " if f.found else "-- "
        print(f"{mark} {f.name:<24} {f.version if f.found else 'not found: ' + f.hint}")
    return 0
