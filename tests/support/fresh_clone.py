"""A fresh checkout of infertop in a temporary folder, started with ``bash scripts/run.sh``
in a tmux pane as a new user would, and a wheelhouse served over HTTP that the
background build takes its wheel from (``INFERTOP_TUNED_WHEELS``), held until released.

Used by tests/e2e/test_fresh_clone.py and benchmarks/first_answer.py.

- :func:`copy_checkout`: the files a clone of this checkout holds (git's tracked and
  untracked-but-not-ignored files: what ``git clone`` gives, plus uncommitted edits), and
  nothing else — no ``.venv``, no build output.
- :class:`HeldWheelhouse`: a find-links page naming one wheel, and the wheel itself, whose
  body is sent one byte a second until :meth:`release` — pip keeps reading (its read
  timeout never fires) and the build stays "in progress" for as long as the test needs.
- :func:`fresh_env`: the environment of a user with nothing cached by infertop: an empty
  ``INFERTOP_CACHE`` (no wheelhouse: the background build starts), a HOME, config, data
  and state of the test's own; pip's own settings (index, cache) as given.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tui.engines.files.ggml_build import build_key, cpu_flags, ggml_cmake_args

BUILD_RECIPE = "ggml-portable-1"  # as scripts/setup.sh names it


def copy_checkout(root: Path, dest: Path) -> Path:
    """The files a clone of ``root`` holds, copied to ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in listed:
        rel = raw.decode()
        if not rel or not (root / rel).is_file():
            continue  # a file deleted in the working tree, or a submodule
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
    return dest


def tuned_wheel(cache: Path | None = None) -> Path | None:
    """This CPU's llama-cpp-python wheel in the developer's wheelhouse (setup.sh --dev
    built it), or None."""
    cache = cache or Path(os.environ.get("INFERTOP_CACHE", Path.home() / ".cache" / "infertop"))
    args = " ".join(ggml_cmake_args(cpu_flags()))
    found = sorted(
        (cache / f"wheels-{build_key(f'{BUILD_RECIPE} {args}')}").glob("llama_cpp_python-*.whl")
    )
    return found[0] if found else None


class HeldWheelhouse:
    """See the module docstring. ``url``: what ``INFERTOP_TUNED_WHEELS`` is set to."""

    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        self.released = threading.Event()
        self.requests: list[str] = []
        held = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                held.requests.append(self.path)
                if self.path.rstrip("/") in ("", "/index.html"):
                    body = f'<a href="{wheel.name}">{wheel.name}</a>\n'.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if self.path.lstrip("/") != wheel.name:
                    self.send_error(404)
                    return
                data = wheel.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                sent = 0
                try:
                    while not held.released.wait(1.0) and sent < len(data) - 1:
                        self.wfile.write(data[sent : sent + 1])  # a byte a second: pip waits
                        self.wfile.flush()
                        sent += 1
                    self.wfile.write(data[sent:])
                except (BrokenPipeError, ConnectionResetError):
                    return  # pip was stopped (the test or benchmark ended its build)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def fresh_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A new user's environment (see the module docstring)."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INFERTOP_", "VIRTUAL_ENV"))}
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))  # pip's, kept
    env.update(
        HOME=str(home),
        INFERTOP_CACHE=str(tmp / "infertop-cache"),
        INFERTOP_STATE=str(tmp / "state.toml"),
        XDG_CONFIG_HOME=str(tmp / "xdg-config"),
        XDG_DATA_HOME=str(tmp / "xdg-data"),
        TERM="xterm-256color",
        PYTHONPATH="",
    )
    env.pop("PYTHONPATH")
    env.update(extra)
    return env


def stop_builder(venv: Path) -> None:
    """Kill a background build left running in ``venv`` (its whole process group)."""
    import signal

    from tui.engines.files.build_state import read_build_state, venv_state_dir

    state = read_build_state(venv_state_dir(str(venv)))
    if state is not None and state.running():
        try:
            os.killpg(state.pid, signal.SIGKILL)
        except OSError:
            pass


def wait_until(pred: Any, timeout: float, what: str, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
