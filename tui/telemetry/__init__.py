"""Hardware and engine-side telemetry samplers (no Textual imports)."""
