"""Our names and units held to the conventions' published lists: the Python package
``opentelemetry-semantic-conventions`` at the pinned version (the registry of semantic
conventions 1.44.0, tui/otel/conventions.py), its ``gen_ai``, ``server`` and ``error``
attribute names and its GenAI metrics' names, units and instruments. A name of ours that
is not theirs (a typo, a name the conventions renamed) fails here."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from tui.otel import conventions as C

PINNED = "0.66b2"  # opentelemetry-semantic-conventions (opentelemetry-sdk 1.45.2 pins it)

semconv = pytest.importorskip("opentelemetry.semconv", reason="the dev extra installs it")


def _published_attributes() -> set[str]:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
    from opentelemetry.semconv.attributes import error_attributes, server_attributes

    names: set[str] = set()
    for module in (gen_ai_attributes, server_attributes, error_attributes):
        names |= {v for k, v in vars(module).items() if k.isupper() and isinstance(v, str)}
    return names


class _Meter:
    """Records what each of the package's create_* functions asks of a meter."""

    def __init__(self) -> None:
        self.made: dict[str, dict[str, Any]] = {}

    def create_histogram(self, name: str, unit: str = "", description: str = "", **kw: Any) -> None:
        self.made[name] = {"instrument": "histogram", "unit": unit, "description": description}

    def __getattr__(self, what: str) -> Any:
        def other(name: str, unit: str = "", description: str = "", **kw: Any) -> None:
            self.made[name] = {"instrument": what.removeprefix("create_"), "unit": unit}

        return other


def _published_metrics() -> dict[str, dict[str, Any]]:
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics

    meter = _Meter()
    for name, fn in vars(gen_ai_metrics).items():
        if name.startswith("create_") and callable(fn):
            fn(meter)
    return meter.made


def test_the_pinned_version_is_installed() -> None:
    assert importlib.metadata.version("opentelemetry-semantic-conventions") == PINNED
    from opentelemetry.semconv.schemas import Schemas

    assert C.SCHEMA_URL in {s.value for s in Schemas}


def test_every_attribute_name_is_the_conventions() -> None:
    published = _published_attributes()
    missing = [name for name in C.SPAN_ATTRIBUTES + C.METRIC_ATTRIBUTES if name not in published]
    assert missing == []


def test_every_metric_is_the_conventions_with_its_unit_and_instrument() -> None:
    published = _published_metrics()
    for spec in C.METRICS:
        assert spec.name in published, spec.name
        assert published[spec.name]["unit"] == spec.unit, spec.name
        assert published[spec.name]["instrument"] == spec.instrument, spec.name


def test_infertops_own_names_stay_under_its_prefix() -> None:
    own = [v for k, v in vars(C).items() if k.startswith("INFERTOP_") and isinstance(v, str)]
    assert own and all(v.startswith("infertop.") for v in own)
    published = _published_attributes()
    assert not set(own) & published


def test_the_advised_boundaries() -> None:
    # as semantic-conventions-genai's gen-ai-metrics.md gives them
    assert C.CLIENT_DURATION.buckets == (
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92
    )  # fmt: skip
    assert C.CLIENT_TIME_TO_FIRST_CHUNK.buckets == C.CLIENT_DURATION.buckets
    assert C.CLIENT_TIME_PER_OUTPUT_CHUNK.buckets == C.CLIENT_DURATION.buckets
    assert C.CLIENT_TOKEN_USAGE.buckets[0] == 1 and C.CLIENT_TOKEN_USAGE.buckets[-1] == 67108864
    assert len(C.CLIENT_TOKEN_USAGE.buckets) == 14
    assert C.SERVER_TIME_TO_FIRST_TOKEN.buckets[0] == 0.001
    assert C.SERVER_TIME_PER_OUTPUT_TOKEN.buckets[-1] == 2.5
