"""tui/otel/plain_post.py: OTLP's POST without ``requests``, under the SDK's own client.

Where it is used and where not (https, a proxy from the environment, NO_PROXY); what a
collector receives (the SDK client's headers, its gzip, on one kept-alive connection) —
beside ``requests`` on the same server; the SDK's retries still working through it
(Retry-After, a connection closed unanswered); and hostile collectors (tests/support/
hostile_server.py: a head dripped for ever, a 1 GiB body, an endless one, a status of
"²", a head over the limit, a header from the environment that would split the request).
The cost: benchmarks/otel_post.py.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.hostile_server import start_in_thread
from tests.support.otlp_sink import OtlpSink
from tui.otel.export import OtelExporter
from tui.otel.plain_post import BODY_KEPT, HeaderRefused, PlainPost, use_plain_post
from tui.transport.http_errors import ProtocolError

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"


class Recorder:
    """A collector on a raw socket: each request's head and body kept, each connection
    counted, each answer taken in turn from ``answers`` (the last one repeats)."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.requests: list[tuple[bytes, bytes]] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/traces"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._exchanges(conn)
        except OSError:  # the client closed on its side (a refused head, its deadline)
            pass

    def _exchanges(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = int(
                    next(
                        line.split(b":", 1)[1]
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    )
                )
                while len(buf) < length:
                    buf += conn.recv(65536)
                body, buf = buf[:length], buf[length:]
                self.requests.append((head, body))
                answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
                if answer == b"close":
                    return
                conn.sendall(answer)

    def headers(self, n: int = 0) -> dict[str, str]:
        lines = self.requests[n][0].decode("latin-1").split("\r\n")[1:]
        return {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}

    def close(self) -> None:
        self.sock.close()


@contextmanager
def recorder(answers: list[bytes]) -> Iterator[Recorder]:
    r = Recorder(answers)
    try:
        yield r
    finally:
        r.close()


def span_exporter(url: str, **kw: Any) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url, **kw)


# --- where it is used -------------------------------------------------------------------


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_plain_http_collector_gets_it(no_proxy_env: pytest.MonkeyPatch) -> None:
    ex = span_exporter("http://127.0.0.1:4318/v1/traces")
    assert use_plain_post(ex) and isinstance(ex._client._transport, PlainPost)


@pytest.mark.parametrize(
    ("url", "env", "plain"),
    [
        ("https://127.0.0.1:4318/v1/traces", {}, False),  # TLS: the SDK's, certificates
        ("http://127.0.0.1:4318/v1/traces", {"HTTP_PROXY": "http://10.9.9.9:3128"}, False),
        ("http://127.0.0.1:4318/v1/traces", {"ALL_PROXY": "http://10.9.9.9:3128"}, False),
        (
            "http://127.0.0.1:4318/v1/traces",
            {"HTTP_PROXY": "http://10.9.9.9:3128", "NO_PROXY": "127.0.0.1"},
            True,
        ),
        (
            "http://collector.internal:4318/v1/traces",
            {"http_proxy": "http://10.9.9.9:3128", "no_proxy": ".internal"},
            True,
        ),
    ],
)
def test_a_proxy_or_tls_keeps_the_sdks_transport(
    no_proxy_env: pytest.MonkeyPatch, url: str, env: dict[str, str], plain: bool
) -> None:
    for name, value in env.items():
        no_proxy_env.setenv(name, value)
    ex = span_exporter(url)
    before = ex._client._transport
    assert use_plain_post(ex) is plain
    assert isinstance(ex._client._transport, PlainPost) is plain
    if not plain:
        assert ex._client._transport is before


def test_the_exporter_uses_it_and_the_spans_arrive(no_proxy_env: pytest.MonkeyPatch) -> None:
    from tests.support.made_outcomes import outcome

    sink = OtlpSink()
    try:
        ex = OtelExporter(sink.url, flush_s=0.1, metric_interval_s=0.2)
        assert isinstance(ex._sender.exporter._client._transport, PlainPost)
        assert isinstance(ex._metrics._client._transport, PlainPost)
        for n in range(20):
            ex.publish(outcome(n))
        assert ex.flush(timeout_s=10)
        deadline = time.monotonic() + 10
        while (len(sink.spans) < 20 or not sink.histograms) and time.monotonic() < deadline:
            time.sleep(0.05)
        ex.close(timeout_s=3)
    finally:
        sink.stop()
    assert len(sink.spans) == 20 and ex.stats.spans_exported == 20
    assert sink.histograms  # the metrics went the same way


# --- what a collector receives ----------------------------------------------------------


def test_the_sdks_headers_and_gzip_on_one_connection(no_proxy_env: pytest.MonkeyPatch) -> None:
    """Against ``requests`` on the same collector: every header the SDK's client sets
    arrives alike (OTEL_EXPORTER_OTLP_HEADERS, its Content-Type and User-Agent, gzip), the
    body is the same, and five POSTs share one connection."""
    no_proxy_env.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20t0k,x-team=a")
    payload = b"\x0a\x03abc" * 1000
    with recorder([OK]) as ours, recorder([OK]) as theirs:
        mine = span_exporter(ours.url, compression=_gzip())
        assert use_plain_post(mine)
        sdk = span_exporter(theirs.url, compression=_gzip())
        for _ in range(5):
            assert mine._client.export(payload).success
        assert sdk._client.export(payload).success
        assert ours.connections == 1 and len(ours.requests) == 5
        got, want = ours.headers(), theirs.headers()
        for name in ("authorization", "x-team", "content-type", "user-agent", "content-encoding"):
            assert got[name] == want[name], name
        assert got["authorization"] == "Bearer t0k" and got["content-encoding"] == "gzip"
        assert got["host"] == ours.url.split("/")[2]
        assert (
            gzip.decompress(ours.requests[0][1])
            == payload
            == gzip.decompress(theirs.requests[0][1])
        )
        mine.shutdown()
        sdk.shutdown()


def _gzip() -> Any:
    from opentelemetry.exporter.otlp.proto.http import Compression

    return Compression.Gzip


def test_the_sdks_retries_still_work_through_it(no_proxy_env: pytest.MonkeyPatch) -> None:
    """503 with Retry-After: 0 is tried again; a connection closed unanswered is tried
    again at once on a new one; both then succeed."""
    busy = b"HTTP/1.1 503 Busy\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"
    with recorder([busy, OK]) as r:
        ex = span_exporter(r.url)
        use_plain_post(ex)
        assert ex._client.export(b"x").success and len(r.requests) == 2
        ex.shutdown()
    with recorder([b"close", OK]) as r:
        ex = span_exporter(r.url)
        use_plain_post(ex)
        assert ex._client.export(b"x").success
        assert len(r.requests) == 2 and r.connections == 2
        ex.shutdown()


# --- hostile collectors -----------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    port, _server, stop = start_in_thread()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop()


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.monotonic()
    result = call()
    return result, time.monotonic() - t0


@pytest.mark.parametrize("mode", ["drip-head", "drip"])
def test_a_dripping_collector_ends_at_the_deadline(hostile: str, mode: str) -> None:
    post = PlainPost(f"{hostile}/{mode}/v1/traces")
    result, took = timed(lambda: post.request("POST", post.url, data=b"x", timeout=0.6))
    assert isinstance(result.error, TimeoutError) and result.status_code is None
    assert post.is_connection_error(result.error)  # the SDK may try again, within its deadline
    assert 0.5 < took < 3  # a byte every DRIP_S would keep a per-read timeout waiting for ever
    assert post._sock is None  # the connection is not kept


@pytest.mark.parametrize("mode", ["huge", "endless"])
def test_a_huge_or_endless_body_is_kept_to_its_bound(hostile: str, mode: str) -> None:
    post = PlainPost(f"{hostile}/{mode}/v1/traces")
    result, took = timed(lambda: post.request("POST", post.url, data=b"x", timeout=10))
    assert result.status_code == 200 and result.error is None
    assert len(result.content()) == BODY_KEPT and post._sock is None
    assert took < 5  # it stopped reading: the server would send 1 GiB


def test_a_malformed_answer_is_an_error_not_retried(hostile: str) -> None:
    post = PlainPost(f"{hostile}/status-super/v1/traces")
    result = post.request("POST", post.url, data=b"x", timeout=5)
    assert isinstance(result.error, ProtocolError) and not post.is_connection_error(result.error)


def test_a_head_over_the_limit_is_refused() -> None:
    long_head = b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (80 * 1024) + b"\r\n\r\n"
    with recorder([long_head]) as r:
        post = PlainPost(r.url)
        result = post.request("POST", r.url, data=b"x", timeout=5)
    assert isinstance(result.error, ProtocolError) and "head over" in str(result.error)


def test_a_header_that_would_split_the_request_is_not_sent(
    no_proxy_env: pytest.MonkeyPatch,
) -> None:
    """OTEL_EXPORTER_OTLP_HEADERS is URL-decoded: ``%0D%0A`` is a CR LF. Nothing is sent."""
    no_proxy_env.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-a=b%0D%0AX-Evil:%201")
    with recorder([OK]) as r:
        ex = span_exporter(r.url)
        use_plain_post(ex)
        result = ex._client.export(b"x")
        assert not result.success and isinstance(result.error, HeaderRefused)
        time.sleep(0.1)
        assert r.connections == 0 and r.requests == []
        ex.shutdown()


def test_doctor_says_which_post_a_collector_gets(no_proxy_env: pytest.MonkeyPatch) -> None:
    from tui.otel.plain_post import post_said

    assert "infertop's POST" in post_said()
    no_proxy_env.setenv("HTTP_PROXY", "http://10.9.9.9:3128")
    assert "a proxy from the environment applies" in post_said()
    no_proxy_env.setenv("NO_PROXY", "127.0.0.1")
    assert "infertop's POST" in post_said()
