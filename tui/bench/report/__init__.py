"""Bench reports: report.json, report.csv, report.md and SVG plots, and the
sections and cells they are made of."""
