"""The TracerError family: every error a user can cause, each with its exit code."""
from __future__ import annotations

from collections.abc import Iterable


class TracerError(Exception):
    """A user-facing error: one line on stderr and a non-zero exit code."""

    exit_code = 2


class UsageError(TracerError):
    """A bad name, value or combination of options."""


class ProfileError(TracerError):
    """A profile YAML that is missing, malformed or invalid."""


class CompileError(TracerError):
    """NVRTC rejected a kernel; the message carries the compiler log."""

    exit_code = 3


class NoGpuError(TracerError):
    """The command needs a CUDA GPU and none is visible."""

    exit_code = 4


class ToolMissingError(TracerError):
    """An external tool (nvdisasm, compute-sanitizer, nsys, cupti-python) is missing or unusable."""

    exit_code = 5


class TraceFormatError(TracerError):
    """A trace or tool output file that cannot be read."""

    exit_code = 6


class TargetFailed(TracerError):
    """The workload or traced command failed: a CUDA fault, a non-zero exit or a crash (what it left
    behind, a trace or a run directory, is still written and analysed)."""

    exit_code = 7


class TimedOut(TracerError):
    """A target or tool was killed at its --timeout (the whole process group)."""

    exit_code = 8


class OutputError(TracerError):
    """An output could not be written (disk full, permission, read-only folder); nothing half-written is left."""

    exit_code = 9


class InternalError(TracerError):
    """tracer's own crash: a bug, never a finding (the traceback goes to a log file; --debug prints it)."""

    exit_code = 70


class ChecksFailed(TracerError):
    """A run completed and at least one check failed (the verdict was already printed)."""

    exit_code = 1


def unknown(kind: str, value: object, allowed: Iterable[object]) -> UsageError:
    """The standard message for a value outside a closed set."""
    names = ", ".join(str(a) for a in allowed)
    return UsageError(f"unknown {kind} {value!r} (allowed: {names})")
