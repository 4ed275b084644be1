"""Hardware sources: whose CPU, RAM and GPUs the hardware panel shows.

A source is named by a string, in config (``telemetry = "..."`` in ``[engines.NAME]``) or
on the command line (``--telemetry SOURCE``):

- ``local`` (the default): this machine, through psutil and NVML;
- ``ssh://[user@]host[:port]``: a remote host, through the user's own OpenSSH client and
  ``infertop agent`` there (or the agent's code fed to the remote ``python3``);
- ``http(s)://HOST:PORT[/metrics]``: a Prometheus exporter — NVIDIA's DCGM exporter,
  node_exporter or nvitop's exporter, told apart by their metric names.

Every source gives :class:`~tui.telemetry.sampler.TelemetrySample`\\ s, each saying whose
hardware it is (``sample.source``) and, for a remote link, its state (``sample.link``:
"remote telemetry lost: REASON — retrying in N s"). ``sample()`` never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Protocol
from urllib.parse import urlsplit

from tui.telemetry.sampler import TelemetrySample
from tui.transport.access import USER_AGENT, HttpAccess, split_credentials

# Whose hardware the panel shows: this machine, a host over ssh, or an exporter's URL.
SourceKind = Literal["local", "ssh", "exporter"]
LOCAL: SourceKind = "local"
_HOST = re.compile(r"^[A-Za-z0-9._%\[\]:-]+$")  # a host name, IPv4 or [IPv6]
_USER = re.compile(r"^[A-Za-z0-9._-]+$")


class SourceError(ValueError):
    """A telemetry source that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class SourceSpec:
    """A parsed telemetry source (see the module docstring)."""

    kind: SourceKind
    host: str = ""  # ssh: the host as the user's ssh config knows it
    user: str | None = None
    port: int | None = None
    url: str = ""  # exporter: the URL scraped (credentials taken out: see ``auth``)
    auth: str | None = field(default=None, repr=False)  # exporter: Authorization value

    @property
    def label(self) -> str:
        """Whose hardware, in words, for the panel's title."""
        if self.kind == "ssh":
            return f"{self.host} via ssh"
        if self.kind == "exporter":
            return self.url
        return "this machine"


def parse_source(text: str) -> SourceSpec:
    """A SourceSpec from ``local``, ``ssh://[user@]host[:port]`` or an exporter URL."""
    raw = text.strip()
    if raw in ("", LOCAL):
        return SourceSpec(LOCAL)
    try:
        parts = urlsplit(raw)
    except ValueError as e:  # "Invalid IPv6 URL", a bad character in the host
        raise SourceError(f"telemetry {raw!r}: not a URL ({e})") from None
    if parts.scheme == "ssh":
        host = parts.hostname or ""
        if not host or host.startswith("-") or not _HOST.match(host):
            raise SourceError(f"telemetry {raw!r}: expected ssh://[user@]host[:port]")
        user = parts.username
        if user is not None and (user.startswith("-") or not _USER.match(user)):
            raise SourceError(f"telemetry {raw!r}: the user name {user!r} is not valid")
        if parts.password is not None or parts.path not in ("", "/") or parts.query:
            raise SourceError(f"telemetry {raw!r}: expected ssh://[user@]host[:port] only")
        try:
            port = parts.port
        except ValueError:
            raise SourceError(f"telemetry {raw!r}: the port is not a number") from None
        return SourceSpec("ssh", host=host, user=user, port=port)
    if parts.scheme in ("http", "https") and parts.hostname:
        try:
            _ = parts.port  # raises for a port that is no number in range
        except ValueError:
            raise SourceError(f"telemetry {raw!r}: the port is not a number in 1-65535") from None
        url = raw if parts.path not in ("", "/") else raw.rstrip("/") + "/metrics"
        try:
            url, auth = split_credentials(url)  # a password never shows in the label
        except ValueError:
            raise SourceError(f"telemetry {raw!r}: not a URL") from None
        return SourceSpec("exporter", url=url, auth=auth)
    raise SourceError(
        f"telemetry {raw!r}: expected 'local', ssh://[user@]host[:port] or an exporter "
        "URL http(s)://HOST:PORT[/metrics]"
    )


def settled(sample: TelemetrySample) -> bool:
    """Whether ``sample`` is a reading, or says its link is lost — not "connecting…"."""
    return sample.link is None or sample.link.startswith("remote telemetry lost")


class HardwareSource(Protocol):
    """Where samples come from. ``sample`` is called from the sampler's thread."""

    label: str

    def start(self) -> None:
        """Begin (open NVML, connect); called once, from the sampler's thread."""

    def sample(self, pid: int | None) -> TelemetrySample:
        """The latest reading; ``pid`` is the engine process to report the RSS of (local
        sources only). Never raises: trouble is in the sample."""
        ...

    def close(self) -> None:
        """Stop and release what :meth:`start` opened."""


def open_source(spec: SourceSpec, interval_s: float, gpu: bool = True) -> HardwareSource:
    """A HardwareSource for ``spec``; nothing connects until its ``start()``.

    ``interval_s``: how often the source is expected to be sampled (the SSH agent's
    interval, the exporter's scrape interval); ``gpu=False`` leaves GPUs out.
    """
    if spec.kind == "ssh":
        from tui.telemetry.remote.remote_ssh import SshSource

        return SshSource(spec.host, spec.user, spec.port, interval_s=interval_s, gpu=gpu)
    if spec.kind == "exporter":
        from tui.telemetry.remote.exporters import ExporterSource

        headers = {"User-Agent": USER_AGENT}
        if spec.auth:
            headers["Authorization"] = spec.auth
        access = HttpAccess(headers=headers)
        return ExporterSource(spec.url, interval_s=interval_s, gpu=gpu, access=access)
    from tui.telemetry.sampler import LocalSource

    return LocalSource(gpu)
