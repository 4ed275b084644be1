"""Row 2: a ./infertop.toml that came with a folder is not trusted until the user says so.

The folder's config names a capture server as an engine's url with ``api_key_env``
naming a secret variable, and a llama-server engine whose ``options.binary`` (run by a
bench sweep) is a script that leaves a marker. Started in that folder, infertop must send
no secret and run no program, and say in one line which command trusts the file; once
trusted (path + content hash) the file is used, until it changes. ``--config PATH`` and
``$INFERTOP_CONFIG`` are the user's own choice and stay trusted.
"""

from __future__ import annotations

import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

SECRET = "s3cret-value-not-for-strangers"


@pytest.fixture
def capture() -> Iterator[tuple[str, list[str]]]:
    """(URL of a server that records every Authorization header, the headers)."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append(self.headers.get("Authorization") or "")
            body = b'{"object": "list", "data": [{"id": "m"}]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def cloned(tmp_path: Path, capture: tuple[str, list[str]]) -> Path:
    """A folder as a clone brings it: its own infertop.toml."""
    folder = tmp_path / "clone"
    folder.mkdir()
    marker = tmp_path / "binary-ran"
    binary = folder / "llama-server"
    binary.write_text(f"#!/bin/sh\ntouch {marker}\nsleep 30\n")
    binary.chmod(0o755)
    model = folder / "m.gguf"
    model.write_bytes(b"GGUF")
    (folder / "infertop.toml").write_text(
        'default_engine = "grab"\n'
        f'[engines.grab]\nkind = "openai"\nurl = "{capture[0]}"\napi_key_env = "MY_SECRET"\n'
        f'[engines.run]\nkind = "llama-server"\nmodel = "{model}"\n'
        f'options = {{ binary = "{binary}" }}\n'
    )
    return folder


def _infertop(launcher, env, cwd, *args):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [*launcher, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_untrusted_local_config_sends_no_secret_and_runs_nothing(
    cloned, launcher, clean_env, capture
) -> None:
    env = {**clean_env, "MY_SECRET": SECRET}
    fleet = _infertop(launcher, env, cloned, "fleet", "--once", "--gap", "0.1")
    out = str(cloned.parent / "out")
    sweep = ["--sweep", "n_threads=1", "--runs", "1", "--warmup", "0", "--out", out]
    bench = _infertop(launcher, env, cloned, "bench", "--engine", "run", *sweep)
    assert capture[1] == [], "the secret was sent"
    assert not (cloned.parent / "binary-ran").exists(), "the config's binary ran"
    for p in (fleet, bench):
        assert p.returncode != 0 and "Traceback" not in p.stderr
        note = next(ln for ln in p.stderr.splitlines() if "infertop.toml" in ln)
        assert "not trusted" in note and "infertop trust infertop.toml" in note


def test_trust_then_edit(cloned, launcher, clean_env, capture) -> None:
    env = {**clean_env, "MY_SECRET": SECRET}
    trust = _infertop(launcher, env, cloned, "trust")
    assert trust.returncode == 0, trust.stderr
    # it says what the file can do before it is trusted
    assert "sends $MY_SECRET to" in trust.stdout and "runs the program" in trust.stdout
    assert "trusted:" in trust.stdout
    fleet = _infertop(launcher, env, cloned, "fleet", "--once", "--gap", "0.1")
    assert fleet.returncode == 0, fleet.stderr
    assert capture[1] and set(capture[1]) == {f"Bearer {SECRET}"}  # trusted: used
    store = Path(clean_env["XDG_CONFIG_HOME"]) / "infertop" / "trusted.json"
    assert store.stat().st_mode & 0o077 == 0
    capture[1].clear()
    config = cloned / "infertop.toml"
    config.write_text(config.read_text().replace("MY_SECRET", "OTHER_SECRET"))
    again = _infertop(launcher, env, cloned, "fleet", "--once", "--gap", "0.1")
    assert capture[1] == [] and "changed since you trusted it" in again.stderr
    gone = _infertop(launcher, env, cloned, "trust", "--remove")
    assert gone.returncode == 0 and "no longer trusted" in gone.stdout


def test_named_config_stays_trusted(cloned, launcher, clean_env, capture) -> None:
    env = {**clean_env, "MY_SECRET": SECRET}
    config = str(cloned / "infertop.toml")
    elsewhere = cloned.parent
    by_flag = _infertop(launcher, env, elsewhere, "--config", config, "fleet", "--once")
    by_env = _infertop(
        launcher, {**env, "INFERTOP_CONFIG": config}, elsewhere, "fleet", "--once", "--gap", "0.1"
    )
    assert by_flag.returncode == 0 and by_env.returncode == 0, by_flag.stderr + by_env.stderr
    assert capture[1] and set(capture[1]) == {f"Bearer {SECRET}"}


def test_bad_trust_requests_are_one_line_errors(tmp_path, launcher, clean_env) -> None:
    (tmp_path / "infertop.toml").write_text("this is = not [toml")
    bad = _infertop(launcher, clean_env, tmp_path, "trust")
    missing = _infertop(launcher, clean_env, tmp_path, "trust", "nope.toml")
    for p in (bad, missing):
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    assert "not trusted" in bad.stderr and "invalid TOML" in bad.stderr
    store = Path(clean_env["XDG_CONFIG_HOME"]) / "infertop" / "trusted.json"
    store.parent.mkdir(parents=True)
    store.write_text("[" * 100_000)  # a broken store trusts nothing, and breaks nothing
    listed = _infertop(launcher, clean_env, tmp_path, "trust", "--list")
    assert listed.returncode == 0 and listed.stdout == ""
