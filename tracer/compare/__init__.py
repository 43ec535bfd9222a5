"""Comparison of two runs: pure analysis over typed records (no I/O). `verdicts` matches ordering
verdicts, hazards, sanitizer findings and campaign cells; `timing` compares per-key duration
distributions (Mann-Whitney U with a bootstrap interval of the median ratio)."""
