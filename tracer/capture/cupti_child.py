"""One Python target traced in this very process (a capture session around a runpy run), its
trace written to OUT. `trace run` no longer uses it (it runs commands as given, with the
bootstrap); scripts/bench_trace.py does, to time CUPTI against an untraced run.

Usage (NVTX_INJECTION64_PATH must already point at libcupti: cupti.child_env):
    python -m tracer.capture.cupti_child OUT.sqlite -- [-m MODULE | SCRIPT | -c CODE] ARGS...
"""
from __future__ import annotations

import runpy
import sys
import tempfile
import traceback
from pathlib import Path

from tracer.capture.options import CaptureOptions


def run_target(target: list[str]) -> int:
    """Run a Python command line in this process, keeping its argv; returns its exit code."""
    try:
        if target[0] == "-m":
            sys.argv = target[1:]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        elif target[0] == "-c":
            sys.argv = ["-c", *target[2:]]
            exec(compile(target[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = list(target)
            sys.path.insert(0, str(Path(target[0]).resolve().parent))
            runpy.run_path(target[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:  # the target's crash is reported, and its exit code kept non-zero
        traceback.print_exc()
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tracer.capture.cupti_child OUT.sqlite -- TARGET...", file=sys.stderr)
        return 2
    from tracer.capture.session import start_session

    out, target = Path(argv[0]), argv[2:]
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}-") as tmp:
        session = start_session(Path(tmp), CaptureOptions(backend="cupti", lazy=False))
        code = run_target(target)
        session.finish("end", code)
        (Path(tmp) / f"{session.stem}.sqlite").replace(out)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
