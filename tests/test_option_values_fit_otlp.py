"""``OtelHooks(attributes=...)`` accepts only values every exporter carries on every span.

The ``attributes`` option is stamped on every span the plugin starts. A value OTLP cannot carry
is not an error when spans start: the exporter's encoder drops it from *every* exported span,
logging an ERROR each time (observed with ``{"app.build_id": 2**64 - 1}``). So ``OtelHooks``
refuses, when it is built, naming the option and the key:

* an int outside int64 (OTLP's int range), a NaN or infinite float (no JSON number): ValueError;
* a key in a namespace the plugin writes itself (``gen_ai.``, ``flowra.``, ``error.``: the value
  would replace the plugin's own on every span): ValueError;
* a list or tuple mixing value types (an OpenTelemetry array holds one type), a nested list,
  ``None``, a non-str or empty key: TypeError.

Both flowra lines build options the same way (``core.telemetry``): these tests run on each.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import options, telemetry

INT64_MAX = 2**63 - 1

BAD_ATTRIBUTES = [
    pytest.param({"app.build_id": 2**64 - 1}, ValueError, "app.build_id", id="int-beyond-int64"),
    pytest.param({"app.floor": -(2**63) - 1}, ValueError, "app.floor", id="int-below-int64"),
    pytest.param({"app.ids": [1, 2**63]}, ValueError, "app.ids", id="list-int-beyond-int64"),
    pytest.param({"app.ratio": float("nan")}, ValueError, "app.ratio", id="nan"),
    pytest.param({"app.ratio": float("inf")}, ValueError, "app.ratio", id="inf"),
    pytest.param({"app.ratios": (0.5, float("-inf"))}, ValueError, "app.ratios", id="tuple-with-inf"),
    pytest.param({"gen_ai.operation.name": "mine"}, ValueError, "gen_ai.operation.name", id="key-gen_ai"),
    pytest.param({"flowra.agent.path": "x"}, ValueError, "flowra.agent.path", id="key-flowra"),
    pytest.param({"error.type": "x"}, ValueError, "error.type", id="key-error"),
    pytest.param({"app.mixed": [1, "a"]}, TypeError, "app.mixed", id="list-mixed-types"),
    pytest.param({"app.mixed": [True, 1]}, TypeError, "app.mixed", id="list-bool-and-int"),
    pytest.param({"app.nested": [[1, 2]]}, TypeError, "app.nested", id="list-nested"),
    pytest.param({"app.none": None}, TypeError, "app.none", id="none"),
    pytest.param({"app.list_none": ["a", None]}, TypeError, "app.list_none", id="list-with-none"),
    pytest.param({"app.map": {"k": "v"}}, TypeError, "app.map", id="mapping"),
    pytest.param({"": "x"}, TypeError, "''", id="empty-key"),
    pytest.param({7: "x"}, TypeError, "7", id="int-key"),
]


@pytest.mark.parametrize(("attributes", "error", "named"), BAD_ATTRIBUTES)
def test_attributes_no_exporter_can_carry_fail_at_construction(
    attributes: dict[Any, Any], error: type[Exception], named: str
) -> None:
    with pytest.raises(error) as caught:
        OtelHooks(attributes=attributes)
    assert type(caught.value) is error
    assert "attributes" in str(caught.value)
    assert named in str(caught.value)


GOOD_ATTRIBUTES: list[dict[str, Any]] = [
    {"app.build_id": INT64_MAX, "app.floor": -(2**63)},
    {"app.ratio": 0.5, "app.big": 1.7976931348623157e308},
    {"app.tags": ["a", "b"], "app.flags": (True, False), "app.empty": []},
    {"tenant": "acme", "deployment.environment": "prod", "app.on": True},
    {"gen_ai_like": "not the namespace", "flowra_app": "nor this"},
]


@pytest.mark.parametrize("attributes", GOOD_ATTRIBUTES)
def test_attributes_every_exporter_carries_are_kept(attributes: dict[str, Any]) -> None:
    # Paired with the bad values: the validation rejects what it should, not everything.
    kept = OtelHooks(attributes=attributes).telemetry.options.attributes
    assert kept == {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()}


def test_without_the_check_every_exported_span_loses_the_attribute_with_an_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Paired negative: ``validate_attributes`` made to accept any int (as before): the option is
    taken, and the OTLP encoder drops it from each span the plugin stamps it on, with an ERROR
    each time (what was observed)."""

    def permissive(value: object) -> dict[str, Any]:
        return dict(value) if isinstance(value, dict) else {}

    monkeypatch.setattr(telemetry, "validate_attributes", permissive)
    hooks = OtelHooks(attributes={"app.build_id": 2**64 - 1, "tenant": "acme"})
    stamp = hooks.telemetry.options.attributes
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for name in ("invoke_agent assistant", "chat m"):
        provider.get_tracer("flowra_otel").start_span(name, attributes=dict(stamp)).end()
    caplog.set_level(logging.ERROR, logger="opentelemetry")
    encoded = encode_spans(exporter.get_finished_spans())
    keys = [
        [kv.key for kv in span.attributes]
        for resource in encoded.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert keys == [["tenant"], ["tenant"]]
    assert len([r for r in caplog.records if "app.build_id" in r.getMessage()]) == 2
    assert options.validate_attributes({"app.build_id": INT64_MAX}) == {"app.build_id": INT64_MAX}
