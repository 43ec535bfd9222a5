"""The on-disk contracts, written and read by both sides: the procs/ layout of a run directory and
its per-process markers, the TRACER_* memory tables. Imports nothing of tracer's but errors."""
