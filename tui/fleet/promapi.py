"""A small client for a Prometheus server's HTTP API (``/api/v1/...``).

``query`` runs an instant query (sent as a POST form, so a long query never meets a URL
length limit); ``targets`` lists the active scrape targets.
Credentials written into the URL (``http://user:pass@prom:9090``) become an
``Authorization: Basic`` header and never appear in messages. Every failure is a
:class:`PrometheusError` with a one-line reason.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

import httpx

from tui.engines.http.http_common import describe_transport_error
from tui.transport.access import USER_AGENT, split_credentials
from tui.transport.http_io import HttpTimeouts
from tui.transport.whole import PROMETHEUS_LIMIT, deadline_client, get_whole, json_body


class PrometheusError(Exception):
    """Prometheus could not be read (one-line reason)."""


def string_labels(labels: Any) -> dict[str, str]:
    """A label set as Prometheus sends it (``{"name": "value"}``), only its string pairs
    kept; anything else is an empty set."""
    if not isinstance(labels, dict):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def vector_sample(item: Any) -> dict[str, Any] | None:
    """One sample of an instant vector, ``{"metric": {labels}, "value": [t, "v"]}``, with
    its labels checked (strings only); None when it is not that shape."""
    if not isinstance(item, dict):
        return None
    value = item.get("value")
    if not isinstance(value, list) or len(value) != 2:
        return None
    return {"metric": string_labels(item.get("metric")), "value": value}


class PrometheusAPI:
    def __init__(self, url: str, timeout_s: float = 5.0, verify_tls: bool = True) -> None:
        clean, auth = split_credentials(url.strip())
        parts = urlsplit(clean)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise PrometheusError(f"not an http(s) URL: {clean!r}")
        self.base = clean.rstrip("/")
        self.timeout_s = timeout_s
        headers = {"User-Agent": USER_AGENT}
        if auth:
            headers["Authorization"] = auth
        self._client = deadline_client(headers=headers, timeout=timeout_s, verify=verify_tls)
        self._lock = threading.Lock()
        self.requests = 0  # HTTP requests made, for the record

    def _call(self, method: str, path: str, data: dict[str, str] | None = None) -> Any:
        with self._lock:
            self.requests += 1
        try:  # the whole answer within the timeout and PROMETHEUS_LIMIT bytes
            r = get_whole(
                self._client,
                self.base + path,
                limit=PROMETHEUS_LIMIT,
                deadline_s=self.timeout_s,
                method=method,
                data=data if method == "POST" else None,
                params=data if method != "POST" else None,
            )
        except httpx.HTTPError as e:
            t = HttpTimeouts(self.timeout_s, self.timeout_s, self.timeout_s)
            raise PrometheusError(
                "Prometheus: " + describe_transport_error(e, self.base, t).message
            ) from None
        try:
            body = json_body(r.content)
        except ValueError:  # not JSON, nested too deep, a number too long
            body = None
        if not isinstance(body, dict):
            raise PrometheusError(
                f"Prometheus {path}: HTTP {r.status_code}, not the Prometheus API "
                f"({' '.join(r.text.split())[:80]!r})"
            )
        if r.status_code != 200 or body.get("status") != "success":
            why = body.get("error") or f"status {body.get('status')!r}"
            raise PrometheusError(f"Prometheus {path}: HTTP {r.status_code}: {str(why)[:200]}")
        return body.get("data")

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query; the result vector (``[{"metric": {...}, "value": [t, "v"]}]``)."""
        form = {"query": promql}
        if at is not None:
            form["time"] = f"{at:.3f}"
        data = self._call("POST", "/api/v1/query", form)
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise PrometheusError("Prometheus /api/v1/query: the answer is not a vector")
        result = data.get("result")
        if not isinstance(result, list):
            raise PrometheusError("Prometheus /api/v1/query: the vector's result is not a list")
        return [s for s in (vector_sample(item) for item in result) if s is not None]

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets (labels, scrapeUrl, health, lastError, ...)."""
        data = self._call("GET", "/api/v1/targets", {"state": "active"})
        targets = data.get("activeTargets") if isinstance(data, dict) else None
        if not isinstance(targets, list):
            raise PrometheusError("Prometheus /api/v1/targets: no list of active targets")
        out = []
        for t in targets:
            if isinstance(t, dict):
                out.append({**t, "labels": string_labels(t.get("labels"))})
        return out

    def close(self) -> None:
        self._client.close()
