"""The engine's inside, read live: llama-server's /metrics, /slots and /props; vLLM's and
SGLang's /metrics; Ollama's /api/ps — each into one :class:`~tui.core.inside.EngineInside`
(:mod:`.reader`), bounded in bytes and time, at most once a second per engine."""
