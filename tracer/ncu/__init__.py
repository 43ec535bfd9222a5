"""Nsight Compute in the loop: ncu's command line (argv), the run (runner), the reader of its
reports (`.ncu-rep` through NVIDIA's ncu-report package, or the `--csv --page raw` export), frozen
per-launch records, and the comparison of variants. Everything after the run is CPU-only."""
