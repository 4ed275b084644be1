"""Headless engine benchmarks (``infertop bench``, ``infertop compare``), in layers:

- ``run``: what a bench does — the plan, the runner, load patterns, prompts, worker
  processes, context depth, the engine's own account per level, the machine it ran on;
- ``stats``: from measured requests to numbers — levels and engines summarised, the
  batching model, context depth, energy;
- ``sweep``: studies over an engine's own options (quantization, threads, perplexity);
- ``report``: report.json, report.csv, report.md and SVG plots, and their sections;
- ``compare``: two reports side by side, as ratios with bootstrap intervals.

Each layer imports only the ones listed before it (and ``compare`` reads reports).
"""
