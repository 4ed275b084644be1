"""Engine-side numbers read from the servers themselves: llama-server and vLLM /metrics,
Ollama's /api/ps, the server panel lines.
"""
