"""The application layer: what a front end (the CLI's views, `tracer serve`) asks of runs on disk,
answered with the same readers and analysis the commands use. No HTTP, no HTML here."""
