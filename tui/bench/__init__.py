"""Headless engine benchmarks: load patterns, runs, statistics, reports.

No Textual import here (a test checks it): the CLI (tui/cli/bench.py) and the TUI screen
(tui/app/screens/bench.py) both drive :class:`tui.bench.runner.BenchRunner`.
"""
