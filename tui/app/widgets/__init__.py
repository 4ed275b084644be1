"""infertop's widgets (each testable in a small host app)."""
