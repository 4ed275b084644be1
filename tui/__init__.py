"""infertop: watch LLM inference happen — streaming text beside honest numbers."""

__version__ = "0.1.0"
