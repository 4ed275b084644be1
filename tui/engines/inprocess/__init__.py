"""In-process engines (llama.cpp, vLLM's AsyncLLM, synthetic, replay) and the worker
process infertop owns that runs them.
"""
