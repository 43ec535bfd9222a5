"""The on-disk contracts, written and read by both sides: the procs/ layout of a run directory, its
per-process markers (marker.py), the TRACER_* memory tables. Imports nothing of tracer's but errors
and the bounded readers (tracer.store.inputs)."""
