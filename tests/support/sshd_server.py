"""A real OpenSSH server on a loopback port, for the remote-hardware tests.

Host and user keys are made with ssh-keygen; the server runs as a plain process
(``sshd -D``) with its own config: key login only, the session's PATH set with
``SetEnv`` (so a test chooses whether ``infertop`` is on the remote PATH). The client side
is an ssh_config file naming the host ``gpu-test`` with the user key and a known_hosts
file — as a user's ~/.ssh/config would — used through a wrapper script named ``ssh``
(``-F CONFIG``), so infertop runs plain ``ssh`` exactly as it would for a user. Needs
openssh-server (scripts/setup-e2e.sh installs it).
"""

from __future__ import annotations

import getpass
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

SSHD = "/usr/sbin/sshd"
HOST_ALIAS = "gpu-test"
VENV_BIN = str(Path(sys.executable).parent)  # holds this venv's infertop
BARE_PATH = "/usr/local/bin:/usr/bin:/bin"  # python3, and no infertop


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sshd:
    def __init__(self, base: Path, remote_path: str) -> None:
        self.dir = base
        base.mkdir(parents=True, exist_ok=True)
        for key in ("host_key", "user_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / key)],
                check=True,
                capture_output=True,
            )
        self.port = free_port()
        self.user_key = base / "user_key"
        self.config = base / "sshd_config"
        self.config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {base / 'host_key'}\n"
            f"AuthorizedKeysFile {base / 'user_key.pub'}\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin yes\nStrictModes no\n"
            f"UsePAM no\nPidFile {base / 'sshd.pid'}\nSetEnv PATH={remote_path}\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> None:
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        log = self.dir / "sshd.log"
        self.proc = subprocess.Popen([SSHD, "-D", "-f", str(self.config), "-E", str(log)])
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"sshd did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.05)

    def sessions(self) -> list[psutil.Process]:
        """Every process the server runs for its connections (monitors, shells, agents)."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        try:
            kids: list[psutil.Process] = psutil.Process(self.proc.pid).children(recursive=True)
            return kids
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        """Stop the server and cut every session it carries (SIGKILL: a lost link)."""
        if self.proc is None:
            return
        for p in self.sessions():
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def client(self, trust_host_key: bool = True) -> Path:
        """A directory holding ``ssh`` (a wrapper: ``ssh -F CONFIG "$@"``) for PATH; the
        config names ``gpu-test``; its known_hosts holds this server's key or not."""
        name = "client-trusted" if trust_host_key else "client-untrusted"
        d = self.dir / name
        d.mkdir(exist_ok=True)
        known = d / "known_hosts"
        host_pub = (self.dir / "host_key.pub").read_text().split()
        known.write_text(
            f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n" if trust_host_key else ""
        )
        cfg = d / "ssh_config"
        cfg.write_text(
            f"Host {HOST_ALIAS}\n  HostName 127.0.0.1\n  Port {self.port}\n"
            f"  User {getpass.getuser()}\n"
            f"  IdentityFile {self.user_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
        )
        wrapper = d / "bin" / "ssh"
        wrapper.parent.mkdir(exist_ok=True)
        wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {cfg} "$@"\n')
        wrapper.chmod(0o755)
        return wrapper.parent

    def ssh_command(self, trust_host_key: bool = True) -> list[str]:
        return [str(self.client(trust_host_key) / "ssh")]


def wait_until(predicate, timeout: float, what: str, step: float = 0.05):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)
