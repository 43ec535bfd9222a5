"""Readers: a trace or run directory on disk in, the model's typed records out (nsys/tracer SQLite,
Kineto JSON, the TRACER_* memory tables, a job's markers). They never run a process."""
