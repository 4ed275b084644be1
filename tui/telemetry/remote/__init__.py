"""Hardware read elsewhere: over the user's ssh (the agent's lines), or from a Prometheus
exporter.
"""
