"""Issue 48 item 1 through ``infertop run`` (the chat core the TUI drives too): a server
whose continuous usage claims 2**53 − 1 tokens for a two-character answer. Main: a
MemoryError traceback and no answer. Now the answer ends cleanly, counted as two chunks
and said to be an estimate."""

from __future__ import annotations

import json
import subprocess


def test_run_keeps_the_answer_of_a_server_that_inflates_its_counts(
    hostile, launcher, clean_env
) -> None:
    p = subprocess.run(
        [*launcher, "run", "--url", f"{hostile}/inflated", "--prompt", "hi", "--json"],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in p.stderr and p.returncode == 0, p.stderr[-2000:]
    result = json.loads(p.stdout)
    assert result["text"] == "hi" and result["finish_reason"] == "stop"
    assert (result["output_tokens"], result["output_tokens_source"]) == (2, "chunk-count-estimate")
    assert result["itl_estimated"] and result["itl_ms_p50"] > 0
