"""One string interner, shared by the capture writer and the trace readers."""
from __future__ import annotations


class Interner:
    """Strings to dense ids, in first-seen order (`items[id]` is the string)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.ids: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.items)
            self.items.append(s)
        return self.ids[s]
