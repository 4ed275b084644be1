"""OpenTelemetry export: each finished request as a GenAI span and GenAI metrics over
OTLP/HTTP (docs/otel.md). The names live in :mod:`tui.otel.conventions`; what a span and
a metric point say of a request, without the SDK, in :mod:`tui.otel.spans` and
:mod:`tui.otel.measures`; the sink that sends them, with the SDK (the optional extra
``infertop[otel]``), in :mod:`tui.otel.export`."""
