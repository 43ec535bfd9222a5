"""Use cases that the commands (and the service) call: each orchestrates capture, reading, analysis
and writing a run directory. Nothing below app (capture, trace, sanitize, ncu, format, ...) imports
it; docs/design/architecture.md has the map."""
