"""tracer's capture bootstrap: `trace run` puts this folder first on PYTHONPATH, so every Python
process of the traced command (children of children too) imports it at start-up. With
TRACER_CAPTURE_DIR set it starts a capture session (tracer/capture/session.py); then it runs any
other sitecustomize found further on sys.path, as Python would have without tracer."""
import os
import sys
import time


def _start_capture() -> None:
    if not os.environ.get("TRACER_CAPTURE_DIR"):
        return
    begun = time.perf_counter()
    try:
        from tracer.capture.session import start_from_env

        start_from_env(begun)
    except Exception as exc:  # the program runs untraced rather than not at all
        sys.stderr.write(f"tracer: capture not started in pid {os.getpid()}: {type(exc).__name__}: {exc}\n")


def _chain_load() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    rest = [p for p in sys.path if os.path.realpath(os.path.abspath(p or os.curdir)) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module  # the program sees its own sitecustomize under that name
    spec.loader.exec_module(module)


_start_capture()
_chain_load()
