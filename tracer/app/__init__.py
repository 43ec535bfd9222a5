"""Use cases that the commands (and the service) call: each opens its inputs, runs capture, reading
and analysis, writes a run directory where it makes one, and returns a typed result with a
`to_json()` (trace_run.py: trace run and import; runs.py: finding and summarising runs; timeline.py:
level-of-detail timeline data; diff.py: two runs compared); no printing, no exit codes, no HTTP.
Nothing below app (capture, trace, sanitize, ncu, format, ...) imports it; docs/design/architecture.md
has the map."""
