"""What a config file may hold: each table's keys with their accepted types and a line
of description (the types are checked by tui/config_keys.py's Validator), and the ranges
the numbers must lie in (checked by tui/config_checks.py). config.example.toml documents
every key."""

from __future__ import annotations

from tui.config_keys import NUM as _NUM

# --- schema: key -> (accepted types, description). Nested tables are validated apart.
TOP_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "default_engine": ((str,), "name of the [engines.NAME] table used at start"),
    "session_dir": ((str,), "folder for JSONL session logs"),
}
GENERATION_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "max_tokens": ((int,), "tokens to generate at most"),
    "temperature": (_NUM, "sampling temperature"),
    "top_p": (_NUM, "nucleus sampling"),
    "seed": ((int,), "sampling seed"),
}
UI_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "theme": ((str,), "theme name"),
    "refresh_hz": (_NUM, "metrics panel refresh rate"),
    "ab_schedule": ((str,), "A/B: auto, sequential or concurrent"),
    "ab_concurrent": ((bool,), "A/B: run both engines at once (older form of ab_schedule)"),
    "keys": ((dict,), "binding id -> key"),
}
TELEMETRY_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "interval_s": (_NUM, "hardware sampling interval"),
    "gpu": ((bool,), "sample NVIDIA GPUs via NVML"),
    "peak_bandwidth_gbs": (_NUM, "device peak memory bandwidth for the roofline line"),
}
FLEET_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "urls": ((list,), "endpoint URLs (default: every engine with a url)"),
    "prometheus": ((str,), "a Prometheus server that scrapes the endpoints"),
    "interval_s": (_NUM, "refresh period"),
    "window_s": (_NUM, "Prometheus: range the rates and quantiles cover"),
    "timeout_s": (_NUM, "timeout of each request to an endpoint"),
}
DISCOVERY_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "enabled": ((bool,), "probe local servers' default ports at start"),
    "ports": ((list,), "loopback ports to probe (default: the engines' default ports)"),
    "timeout_s": (_NUM, "timeout of each probe request"),
    "gguf_dirs": ((list,), "folders scanned for GGUF files (default: the usual ones)"),
}
LEDGER_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "enabled": ((bool,), "keep every finished request in the ledger"),
    "path": ((str,), "the ledger file (default: the data folder's ledger.sqlite3)"),
    "keep_days": (_NUM, "delete requests older than this many days"),
    "max_mb": (_NUM, "delete the oldest requests past this many MiB"),
    "queue": ((int,), "requests waiting to be written before new ones are dropped"),
    "fingerprints": ((bool,), "proxy: keep API keys' fingerprints (never the keys)"),
    "processes": ((bool,), "proxy: look up the local process of a client on this host"),
    "top_clients": ((int,), "proxy: clients /infertop/metrics names apart (the rest: other)"),
}
FINGERPRINT_CHARS = 14  # "k:" and 12 hex digits (tui/proxy/identity.py)
CLIENT_NAME_CHARS = 200
OTEL_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "endpoint": ((str,), "OTLP/HTTP collector base URL, or 'env' (OTEL_EXPORTER_OTLP_*)"),
    "capture_content": ((bool,), "the user's own chat: prompt and answer on its spans"),
    "trace_propagation": ((bool,), "send a W3C traceparent with each request"),
    "metric_interval_s": (_NUM, "how often metrics are exported"),
    "timeout_s": (_NUM, "each export's time limit"),
}
ENGINE_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "kind": ((str,), "engine kind"),
    "model": ((str,), "GGUF path, 'default', or model name on a server"),
    "url": ((str,), "server base URL"),
    "n_ctx": ((int,), "context size"),
    "n_threads": ((int,), "CPU threads"),
    "n_gpu_layers": ((int,), "layers offloaded to the GPU"),
    "api_key_env": ((str,), "environment variable holding the API key"),
    "headers": ((dict,), "extra HTTP headers"),
    "verify_tls": ((bool,), "verify TLS certificates"),
    "connect_timeout_s": (_NUM, "connect timeout"),
    "read_timeout_s": (_NUM, "HTTP: wait for the response to start (queue + prefill)"),
    "stall_timeout_s": (_NUM, "HTTP: longest gap between streamed bytes (default: read)"),
    "endpoint": ((str,), "'chat', 'completions' or 'responses' (the OpenAI API's)"),
    "options": ((dict,), "engine-specific options passed through"),
    "telemetry": (
        (str,),
        "whose hardware the panel shows with this engine: 'local', ssh://[user@]host[:port] "
        "or an exporter URL",
    ),
}


# (dotted key pattern, lowest, highest, lowest allowed itself?) for numbers with a range
RANGES: tuple[tuple[str, float, float, bool], ...] = (
    ("generation.max_tokens", 1, 10_000_000, True),
    ("generation.temperature", 0, 100, True),
    ("generation.top_p", 0, 1, False),
    ("generation.seed", 0, 2**63 - 1, True),
    ("ui.refresh_hz", 0, 1000, False),
    ("telemetry.interval_s", 0, 3600, False),
    ("telemetry.peak_bandwidth_gbs", 0, 1e6, False),
    ("fleet.interval_s", 0, 3600, False),
    ("fleet.window_s", 1, 86_400, True),
    ("fleet.timeout_s", 0, 600, False),
    ("discovery.timeout_s", 0, 60, False),
    ("ledger.keep_days", 0, 36_500, False),
    ("ledger.max_mb", 0, 1_048_576, False),
    ("ledger.queue", 1, 10_000_000, True),
    ("ledger.top_clients", 0, 1000, True),
    ("otel.metric_interval_s", 0.1, 3600, True),
    ("otel.timeout_s", 0, 120, False),
)
ENGINE_RANGES: tuple[tuple[str, float, float, bool], ...] = (
    ("n_ctx", 1, 100_000_000, True),
    ("n_threads", 1, 4096, True),
    ("n_gpu_layers", -1, 1_000_000, True),
    ("connect_timeout_s", 0, 86_400, False),
    ("read_timeout_s", 0, 86_400, False),
    ("stall_timeout_s", 0, 86_400, False),
)
