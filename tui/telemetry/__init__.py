"""Hardware telemetry (no Textual): psutil, NVML, Apple Silicon, a sampler thread."""
