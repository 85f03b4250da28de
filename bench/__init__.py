"""Benchmarks that write figures to BENCHMARKS.md (never run as timed tests)."""
