"""Use cases that commands and the service call: each opens its inputs, runs the analysis and
returns a typed result with a `to_json()`; no printing, no exit codes."""
