"""The HTML report: one self-contained page built from opened artifacts (tracer.artifact)."""
