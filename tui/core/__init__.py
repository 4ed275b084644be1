"""Headless core: stream events, request timelines, metric definitions, statistics.

Nothing in this package imports Textual (a test checks it).
"""
