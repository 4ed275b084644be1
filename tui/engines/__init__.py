"""Engines: one module per engine behind one interface (no Textual imports here)."""
