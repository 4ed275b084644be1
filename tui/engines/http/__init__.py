"""The HTTP engines: a server at a URL, streamed over HTTP (OpenAI-compatible, the
Responses API, Anthropic Messages, llama-server, vLLM, Ollama).
"""
