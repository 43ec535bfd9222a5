"""Use cases that commands and the service call: each opens its inputs, runs the analysis and
returns a typed result with a `to_json()` (runs.py: finding and summarising runs; timeline.py:
level-of-detail timeline data; diff.py: two runs compared); no printing, no exit codes, no HTTP."""
