"""Running a bench: the plan, the runner, load patterns, prompts, worker processes,
the engine's own account per level, context depth and the machine it ran on."""
