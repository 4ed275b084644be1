"""Headless subcommands of the ``infertop`` command (see tui/__main__.py)."""
