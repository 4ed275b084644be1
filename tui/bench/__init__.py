"""Headless benchmarking: load patterns, runs, reports (no Textual imports)."""
