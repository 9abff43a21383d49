"""Benchmarks and matches of rtplan, run from a checkout as `python -m bench.<script>`."""
