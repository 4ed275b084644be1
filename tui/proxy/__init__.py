"""``infertop proxy``: a streaming reverse proxy that watches other clients' inference.

Headless (no Textual): requests pass through unchanged and at once (:mod:`.forward`),
each one stamped where its bytes arrive and measured with the same definitions as
everywhere in infertop (:mod:`tui.core.metrics`); what it saw is exported as Prometheus
metrics (:mod:`.exposition`), JSONL summaries (:mod:`.events_file`) and a live stream
the TUI's requests view attaches to (:mod:`.own_routes`, :mod:`.watch`).
"""
