"""Tell servers apart from a URL alone: Ollama, llama-server, vLLM, other OpenAI-compatible.

Probes, each a short GET, in this order (the first conclusive one wins):

1. ``/api/version`` answers ``{"version": ...}`` and ``/api/tags`` lists models → ollama
   (Ollama also serves /v1, so it must be checked before the generic case);
2. ``/props`` answers JSON with ``total_slots`` or ``default_generation_settings``
   → llama-server;
3. ``/v1/models`` lists models ``owned_by: vllm``, or ``/metrics`` has ``vllm:`` series
   → vllm (``/version`` gives its version);
4. ``/v1/models`` answers an OpenAI model list → openai.

A URL that cannot be reached, or answers but is none of these, is an EngineError with a
one-line reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from tui.engines.base import EngineError, EngineSpec
from tui.engines.http.http_common import (
    access_for,
    base_url,
    describe_transport_error,
    request_headers,
)
from tui.transport.access import HttpAccess
from tui.transport.http_io import HttpTimeouts, WholeResponse
from tui.transport.whole import SCRAPE_LIMIT, deadline_client, get_whole, json_body


@dataclass
class Detection:
    """What answered at a URL. ``evidence``: the probes that decided, in words."""

    url: str
    kind: str
    evidence: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    version: str | None = None

    def describe(self) -> str:
        parts = [f"{self.kind} at {self.url}"]
        if self.version:
            parts.append(f"version {self.version}")
        if self.models:
            shown = ", ".join(self.models[:5]) + (" ..." if len(self.models) > 5 else "")
            parts.append(f"models: {shown}")
        else:
            parts.append("no models listed")
        return "; ".join(parts) + f" (evidence: {'; '.join(self.evidence)})"


def _json(r: WholeResponse | None) -> Any:
    if r is None or r.status_code != 200:
        return None
    try:
        return json_body(r.content)
    except ValueError:
        return None


class _Prober:
    def __init__(self, base: str, timeout_s: float, access: HttpAccess) -> None:
        self.base = base
        self.client = deadline_client(
            timeout=timeout_s, headers=access.headers, verify=access.verify_tls
        )
        self.timeout_s = timeout_s
        self.reached = False
        self.notes: list[str] = []

    def get(self, path: str) -> WholeResponse | None:
        try:  # within the timeout and SCRAPE_LIMIT bytes: a probed server is untrusted
            r = get_whole(
                self.client, self.base + path, limit=SCRAPE_LIMIT, deadline_s=self.timeout_s
            )
        except httpx.HTTPError as e:
            if not self.reached:
                t = HttpTimeouts(self.timeout_s, self.timeout_s, self.timeout_s)
                raise EngineError(describe_transport_error(e, self.base, t).message) from None
            self.notes.append(f"GET {path}: {type(e).__name__}")
            return None
        self.reached = True
        self.notes.append(f"GET {path}: {r.status_code}")
        return r


def _model_ids(data: Any) -> list[str]:
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return [str(m["id"]) for m in data["data"] if isinstance(m, dict) and "id" in m]
    return []


def detect_server(url: str, timeout: float = 3.0, access: HttpAccess | None = None) -> Detection:
    """Probe ``url`` and say which kind of LLM server it is (see the module docstring).
    ``access``: headers and TLS setting to probe with (credentials in ``url`` are used as
    an Authorization header)."""
    spec = EngineSpec(name="probe", kind="?", url=url)
    base = base_url(spec)
    if access is None:
        access = HttpAccess(request_headers(spec, None))
    p = _Prober(base, timeout, access)
    try:
        return _detect(p)
    finally:
        p.client.close()


def _detect(p: _Prober) -> Detection:
    version = _json(p.get("/api/version"))
    if isinstance(version, dict) and "version" in version:
        tags = _json(p.get("/api/tags"))
        if isinstance(tags, dict) and isinstance(tags.get("models"), list):
            names = [
                str(m.get("name") or m.get("model")) for m in tags["models"] if isinstance(m, dict)
            ]
            return Detection(
                p.base,
                "ollama",
                ["/api/version and /api/tags answer"],
                names,
                str(version["version"]),
            )
    props = _json(p.get("/props"))
    models_resp = p.get("/v1/models")
    models_json = _json(models_resp)
    models = _model_ids(models_json)
    if isinstance(props, dict) and (
        "total_slots" in props or "default_generation_settings" in props
    ):
        ver = props.get("build_info")
        return Detection(
            p.base, "llama-server", ["/props has total_slots"], models, str(ver) if ver else None
        )
    listed = models_json.get("data") if isinstance(models_json, dict) else None
    owners = (
        {str(m.get("owned_by")) for m in listed if isinstance(m, dict)}
        if isinstance(listed, list)
        else set()
    )
    evidence = []
    if "vllm" in owners:
        evidence.append("/v1/models owned_by vllm")
    else:
        metrics = p.get("/metrics")
        if metrics is not None and metrics.status_code == 200 and "vllm:" in metrics.text:
            evidence.append("/metrics has vllm: series")
    if evidence:
        ver = _json(p.get("/version"))
        v = str(ver["version"]) if isinstance(ver, dict) and "version" in ver else None
        return Detection(p.base, "vllm", evidence, models, v)
    if isinstance(models_json, dict) and isinstance(models_json.get("data"), list):
        return Detection(p.base, "openai", ["/v1/models answers an OpenAI model list"], models)
    if models_resp is not None and models_resp.status_code in (401, 403):
        return Detection(
            p.base, "openai", [f"/v1/models needs an API key (HTTP {models_resp.status_code})"], []
        )
    raise EngineError(
        f"{p.base} answers HTTP but is not an LLM server infertop recognises ({', '.join(p.notes)})"
    )


def spec_from_url(
    url: str,
    model: str | None = None,
    kind: str | None = None,
    timeout: float = 3.0,
    verify_tls: bool = True,
) -> EngineSpec:
    """An EngineSpec for a server given only its URL (kind detected unless given).
    Credentials in the URL become its Authorization header; ``verify_tls=False`` accepts
    a certificate that cannot be verified (``--insecure``)."""
    from tui.engines.kinds import engine_kind

    probe = EngineSpec(name="url", kind=kind or "?", url=url, verify_tls=verify_tls)
    base = base_url(probe)
    if kind is None:
        found = detect_server(base, timeout, access_for(probe))
        kind = found.kind
        if model is None and found.models:
            model = found.models[0]
    else:
        engine_kind(kind)  # EngineError naming the known kinds when unknown
    host = urlsplit(base).netloc
    return EngineSpec(
        name=f"{kind}@{host}",
        kind=kind,
        url=base,
        model=model,
        headers=dict(probe.headers),
        verify_tls=verify_tls,
    )
