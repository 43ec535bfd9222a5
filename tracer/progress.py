"""A spinner on stderr for a step that takes long: shown only after SHOW_AFTER_S seconds (a quick
command never shows one, nor imports rich), only where stderr is a terminal and NO_COLOR unset, and
gone (transient) before the command prints its result."""
from __future__ import annotations

import os
import sys
import threading
from typing import Any

SHOW_AFTER_S = 2.0


def wanted(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    if env.get("TERM") == "dumb" or env.get("TRACER_NO_PROGRESS"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Spinner:
    """start() arms it, stop() removes it (and cancels it when it was never shown)."""

    def __init__(self, label: str, after_s: float = SHOW_AFTER_S) -> None:
        self.label, self.lock, self.status, self.stopped = label, threading.Lock(), None, False
        self.stream = sys.stderr  # the terminal itself: cli wraps sys.stderr afterwards to escape names
        self.timer = threading.Timer(after_s, self._show)
        self.timer.daemon = True

    def start(self) -> Spinner:
        self.timer.start()
        return self

    def _show(self) -> None:
        from rich.console import Console

        with self.lock:
            if self.stopped:
                return
            status: Any = Console(file=self.stream, no_color=bool(os.environ.get("NO_COLOR"))).status(self.label)
            status.start()
            self.status = status

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            self.timer.cancel()
            if self.status is not None:
                self.status.stop()
                self.status = None
