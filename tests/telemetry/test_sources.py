"""Telemetry source names: local, ssh://[user@]host[:port], exporter URLs."""

from __future__ import annotations

import pytest

from tui.telemetry.sources import SourceError, SourceSpec, parse_source


def test_local_is_the_default() -> None:
    assert parse_source("") == parse_source("local") == SourceSpec("local")
    assert parse_source("local").label == "this machine"


def test_ssh_sources() -> None:
    s = parse_source("ssh://gpu-box")
    assert (s.kind, s.host, s.user, s.port) == ("ssh", "gpu-box", None, None)
    assert s.label == "gpu-box via ssh"
    s = parse_source("ssh://alice@10.0.0.5:2222")
    assert (s.host, s.user, s.port) == ("10.0.0.5", "alice", 2222)


@pytest.mark.parametrize(
    "bad",
    [
        "ssh://-oProxyCommand=evil",  # an option where the host goes: never
        "ssh://-x@host",
        "ssh://host/path",
        "ssh://u:pw@host",
        "ssh://host:port",
        "ssh://",
        "ftp://x",
        "gpu-box",
        "ssh://[::1",  # urlsplit raises ValueError: still a SourceError
        "http://[x",
        "http://h:99999",
    ],
)
def test_bad_sources_are_refused_with_the_reason(bad: str) -> None:
    with pytest.raises(SourceError, match="telemetry"):
        parse_source(bad)


def test_exporter_urls_default_to_metrics() -> None:
    assert parse_source("http://h:9400").url == "http://h:9400/metrics"
    assert parse_source("http://h:9400/").url == "http://h:9400/metrics"
    assert parse_source("https://h/custom").url == "https://h/custom"
    assert parse_source("http://h:9400").label == "http://h:9400/metrics"
