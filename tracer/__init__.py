"""tracer: investigate GPU kernel-ordering and numerical-corruption bugs."""
from __future__ import annotations

__version__ = "0.1.0"
