"""A remote host's hardware over the user's own OpenSSH client (``ssh://[user@]host[:port]``).

infertop runs ``ssh`` — so ~/.ssh/config, keys, the agent, ProxyJump and known_hosts all
apply as they do for the user — as an argument list, never a shell string built from
input::

    ssh -T -o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=5
        -o ServerAliveCountMax=3 [-p PORT] [-l USER] HOST -- <the remote command>

BatchMode means no prompt can hang the link: a password it would ask for, or a host key
that is not trusted, fails at once with ssh's own message ("Host key verification
failed."). The remote command is a fixed template; the only thing formatted into it is the
sampling interval, a number::

    exec sh -c 'if command -v infertop >/dev/null 2>&1; then exec infertop agent
    --interval S; else exec python3 - --interval S; fi'

and the agent's source (tui/telemetry/devices/agent.py after the stdlib-only readers it uses,
bundled into one file: :func:`agent_source`) is written to ssh's stdin, then stdin is
closed: where infertop is installed the agent ignores it, where only python3 is,
``python3 -`` runs it. A reader thread turns each line into a TelemetrySample labelled
"HOST via ssh". The link is lost when ssh exits (the reason is ssh's last stderr line),
sends garbage, or sends nothing for several intervals ("no sample for 5 s"); it then
reconnects with backoff (tui/telemetry/remote/remote_link.py).
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from tui.telemetry.remote.agent_lines import MAX_LINE, AgentLineError, sample_from_line
from tui.telemetry.remote.remote_link import LinkLost, RemoteLink

CONNECT_TIMEOUT_S = 10
SERVER_ALIVE_S = 5
REMOTE_COMMAND = (
    "exec sh -c 'if command -v infertop >/dev/null 2>&1; "
    "then exec infertop agent --interval {interval}{gpu}; "
    "else exec python3 - --interval {interval}{gpu}; fi'"
)
NOISE_LINES = 50  # lines a login script may print before the agent's first sample
_EOF = object()


# The agent's modules, in the order the bundle defines them (each imports only those
# before it, and only outside the bundle: tui/telemetry/devices/agent.py).
AGENT_MODULES = ("host_stats", "agent_nvml", "amd_gpu", "apple_gpu", "rapl", "agent")
BUNDLE_HEAD = (
    b'"""infertop agent, bundled: tui/telemetry/devices/{host_stats,agent_nvml,amd_gpu,apple_gpu,'
    b'rapl,agent}.py"""\n_INFERTOP_AGENT_BUNDLE = True\n'
)


def agent_source() -> bytes:
    """The agent's code, as fed to a remote ``python3 -``: its modules in one file."""
    here = Path(__file__).parents[1] / "devices"
    parts = [BUNDLE_HEAD]
    for name in AGENT_MODULES:
        parts.append(f"\n# ---- tui/telemetry/devices/{name}.py ----\n".encode())
        parts.append((here / f"{name}.py").read_bytes())
    return b"".join(parts)


def remote_command(interval_s: float, gpu: bool = True) -> str:
    """The fixed remote command with the interval (a number we format) filled in."""
    interval = float(interval_s)
    if not (0 < interval <= 3600):
        raise ValueError("interval_s must be > 0 and <= 3600")
    return REMOTE_COMMAND.format(interval=f"{interval:g}", gpu="" if gpu else " --no-gpu")


def silence_limit_s(interval_s: float) -> float:
    """How long without a sample means the link is lost: five intervals, at least 5 s."""
    return max(5.0, 5.0 * interval_s)


class SshSource(RemoteLink):
    """Samples from ``infertop agent`` on ``host`` through ssh (see the module docstring)."""

    def __init__(
        self,
        host: str,
        user: str | None = None,
        port: int | None = None,
        interval_s: float = 0.5,
        gpu: bool = True,
        ssh_command: list[str] | None = None,
        connect_timeout_s: int = CONNECT_TIMEOUT_S,
        backoff_s: tuple[float, ...] | None = None,
    ) -> None:
        """``ssh_command``: the client's argv start (default ``["ssh"]``; tests add
        ``-F CONFIG``)."""
        if not host or host.startswith("-"):
            raise ValueError(f"not a host name: {host!r}")
        if user is not None and (not user or user.startswith("-")):
            raise ValueError(f"not a user name: {user!r}")
        super().__init__(f"{host} via ssh", interval_s, backoff_s)
        self.host, self.user, self.port = host, user, port
        self.gpu = gpu
        self.ssh_command = list(ssh_command or ["ssh"])
        self.connect_timeout_s = int(connect_timeout_s)
        self.silence_s = silence_limit_s(interval_s)
        self._proc: subprocess.Popen[bytes] | None = None
        self._proc_lock = threading.Lock()
        self.last_stderr: list[str] = []

    def argv(self) -> list[str]:
        """The ssh command line (a list: no shell ever sees the host or user)."""
        args = [
            *self.ssh_command,
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={self.connect_timeout_s}",
            "-o",
            f"ServerAliveInterval={SERVER_ALIVE_S}",
            "-o",
            "ServerAliveCountMax=3",
        ]
        if self.port is not None:
            args += ["-p", str(int(self.port))]
        if self.user is not None:
            args += ["-l", self.user]
        return [*args, self.host, "--", remote_command(self.interval_s, self.gpu)]

    # -- one session -----------------------------------------------------------------------
    def session(self) -> None:
        try:
            proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # no terminal: nothing can prompt, ^C is ours
            )
        except FileNotFoundError:
            raise LinkLost(f"{self.ssh_command[0]} not found (install OpenSSH's client)") from None
        except OSError as e:
            raise LinkLost(f"cannot start ssh: {e.strerror or e}") from None
        with self._proc_lock:
            self._proc = proc
        if self.stopping:  # closed while starting: close() may have missed this process
            self._end(proc)
            return
        stderr: collections.deque[str] = collections.deque(maxlen=20)
        lines: queue.Queue[object] = queue.Queue(maxsize=64)
        assert proc.stdin and proc.stdout and proc.stderr
        readers = [
            threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True),
            threading.Thread(target=_read_stderr, args=(proc.stderr, stderr), daemon=True),
        ]
        for r in readers:
            r.start()
        try:
            _feed(proc.stdin, agent_source())
            self._read(proc, lines, stderr, readers[1])
        finally:
            self._end(proc)
            self.last_stderr = list(stderr)

    def _read(
        self,
        proc: subprocess.Popen[bytes],
        lines: queue.Queue[object],
        stderr: collections.deque[str],
        stderr_reader: threading.Thread,
    ) -> None:
        first_limit = self.connect_timeout_s + 15.0 + self.interval_s  # connect, start python
        got_one = False
        noise = 0
        last = time.monotonic()
        while not self.stopping:
            limit = self.silence_s if got_one else first_limit
            try:
                item = lines.get(timeout=max(0.05, last + limit - time.monotonic()))
            except queue.Empty:
                raise LinkLost(f"no sample for {limit:.0f} s") from None
            if self.stopping:
                return
            if item is _EOF:
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
                stderr_reader.join(2)
                raise LinkLost(_exit_reason(proc.returncode, list(stderr)))
            assert isinstance(item, bytes)
            if not item.strip():
                continue
            try:
                s = sample_from_line(item, self.label, time.monotonic())
            except AgentLineError as e:
                noise += 1
                if got_one or noise > NOISE_LINES or item.lstrip().startswith(b"{"):
                    raise LinkLost(f"garbage from the agent: {e}") from None
                continue  # a login script's chatter before the agent starts
            got_one = True
            last = time.monotonic()
            self.deliver(s)

    def interrupt(self) -> None:
        with self._proc_lock:
            proc = self._proc
        if proc is not None:
            _kill(proc)

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        _kill(proc)
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            _kill(proc, signal.SIGKILL)
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        with self._proc_lock:
            if self._proc is proc:
                self._proc = None


def _feed(stdin: IO[bytes], code: bytes) -> None:
    """The agent's code to ssh's stdin, then EOF (ssh may already be gone: fine)."""
    try:
        stdin.write(code)
        stdin.flush()
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            stdin.close()
        except OSError:
            pass


def _read_lines(stdout: IO[bytes], out: queue.Queue[object]) -> None:
    try:
        while True:
            line = stdout.readline(MAX_LINE + 1)
            if not line:
                break
            out.put(line)
    except (OSError, ValueError):
        pass
    finally:
        out.put(_EOF)


def _read_stderr(stderr: IO[bytes], keep: collections.deque[str]) -> None:
    try:
        for raw in iter(lambda: stderr.readline(8192), b""):
            text = raw.decode("utf-8", "replace").strip()
            if text:
                keep.append(text)
    except (OSError, ValueError):
        pass


_CHATTER = ("Warning: Permanently added", "** ")


def _exit_reason(returncode: int | None, stderr: list[str]) -> str:
    """ssh's last meaningful stderr line, else its exit status."""
    meaningful = [x for x in stderr if not x.startswith(_CHATTER)]
    if meaningful:
        return meaningful[-1]
    if stderr:
        return stderr[-1]
    if returncode is None:
        return "ssh stopped sending"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"ssh was killed ({name})"
    return f"ssh exited with status {returncode}"


def _kill(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)  # ssh and anything it started (a ProxyCommand)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
