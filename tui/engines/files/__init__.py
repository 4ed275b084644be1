"""Models on disk and the native build: GGUF headers and scans, the embedded default model,
llama.cpp's build flags and progress.
"""
