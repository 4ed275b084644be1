"""Alerts on live objectives: ``[[alerts]]`` rules (:mod:`tui.alerts.rules`) evaluated
over finished requests, the engine's gauges and the hardware (:mod:`tui.alerts.engine`),
their events sent to a screen line, a JSONL log and a webhook (:mod:`tui.alerts.notify`).
README "Alerts" has the rule format."""
