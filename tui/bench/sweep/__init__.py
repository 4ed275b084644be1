"""Studies over an engine's own options (--sweep): quantization variants, thread
counts, perplexity."""
