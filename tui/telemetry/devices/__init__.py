"""Hardware readers (NVIDIA, AMD, Apple, RAPL, the host) and the agent that bundles the
stdlib-only ones for a remote python3.
"""
