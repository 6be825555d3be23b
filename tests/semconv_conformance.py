"""Check finished spans and collected metrics against the vendored GenAI semantic-convention model.

The model is ``tests/semconv/`` (open-telemetry/semantic-conventions-genai at fe5608e with the merged
changes #440, #469, #410 and #363 applied, see PROVENANCE.md): the normative YAML (attribute
registry, span, metric and event definitions with their requirement levels) and the JSON schemas of
the content attributes.  Reading the model instead
of hand-writing expectations means a test fails when the plugin drifts from the conventions,
also for attributes no test thought of, and moving the target is a file swap.

``check_spans`` / ``check_metrics`` return violation strings (empty: conformant); each names the
span or metric, so a list collected over many tests can be deduplicated.  What is checked:

* spans carrying ``gen_ai.operation.name``: the span definition(s) for the operation and kind;
  span kind; name ``"{operation} {target}"`` (``"{operation}"`` when the target is unknown);
  required attributes; the conditionally required ones whose condition is knowable from the span
  (``error.type`` iff status ERROR, ``gen_ai.request.model`` on inference, ``server.port`` with
  ``server.address``); attribute types; enum values; no ``gen_ai.*`` key outside the registry;
  content attributes parse as JSON and validate against their schema; a registered
  ``gen_ai.usage.*`` key the span's definition does not list (#469 took the cache counts off the
  internal ``invoke_agent`` span).  ``extras=True`` also reports every other registered
  ``gen_ai.*`` key the span's definition does not list.  The one exception to "no unknown
  ``gen_ai.*`` key": the four content-reference keys of the reference implementation
  (``REFERENCE_IMPLEMENTATION_KEYS``: util-genai's upload hook), which the conventions lack.
* log records with an ``event_name`` of events.yaml (``check_log_records``, called by the tests
  that collect logs): the event's attributes (the inference span's, for
  ``gen_ai.client.inference.operation.details``), their types, and the content attributes, which
  an event carries as structured values rather than JSON text, against their schemas.
* metrics named ``gen_ai.*`` and ``mcp.*``: known to the model; instrument type; unit; bucket
  advice; per data point the required attributes, types, enum values and no unknown ``gen_ai.*``
  key; no ``mcp.session.id`` on an ``mcp.*`` point.
* spans carrying ``mcp.method.name`` (the MCP page's client span, alone or its attributes on
  ``execute_tool``): ``_check_mcp``.

Enums: the model marks none as closed, and the rendered conventions say for every enum "if one
of the well-known values applies, it MUST be used; otherwise a custom value MAY be used".  So a
value outside the members is accepted, except (a) ``_OTHER``, which the conventions define only
for ``error.type``, and (b) a near miss of a member (same letters, other case or separators, e.g.
``Chat`` or ``tool-call``), which is a misspelt well-known value.  ``gen_ai.token.type`` is treated
as closed: the token-usage histogram means nothing with a third value.

Run over every test (in ``tests/conftest.py``): after the test body, before fixtures tear down::

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
        result = yield  # re-raises if the test failed: nothing more to say then
        if item.get_closest_marker("semconv_exempt") is None:
            funcargs = getattr(item, "funcargs", {})
            exporter = funcargs.get("span_exporter")
            problems = check_spans(exporter.get_finished_spans()) if exporter is not None else []
            if "meter_provider" in funcargs:  # a reader never attached to a provider cannot collect
                problems += check_metrics(funcargs["metric_reader"].get_metrics_data())
            if problems:
                pytest.fail("GenAI semconv violations:\n" + "\n".join(sorted(set(problems))), pytrace=False)
        return result

plus ``config.addinivalue_line("markers", "semconv_exempt: ...")`` in ``pytest_configure`` for tests
that plant violations on purpose.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped]  # no stubs in the lock; only Draft202012Validator is used
import yaml
from opentelemetry.sdk.metrics.export import Histogram, MetricsData, Sum
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

__all__ = ["SemconvModel", "check_log_records", "check_metrics", "check_spans", "load_model"]

MODEL_DIR: Final = Path(__file__).parent / "semconv"

CORE_ATTRIBUTE_TYPES: Final[Mapping[str, str]] = {
    # Referenced by the GenAI model but defined in the core registry (stable attributes).
    "error.type": "string",
    "server.address": "string",
    "server.port": "int",
    # Referenced by the MCP model (the core registry's jsonrpc.*, rpc.*, network.* attributes).
    "jsonrpc.request.id": "string",
    "jsonrpc.protocol.version": "string",
    "rpc.response.status_code": "string",
    "network.transport": "string",
    "network.protocol.name": "string",
    "network.protocol.version": "string",
}

BUCKET_ADVICE: Final[Mapping[str, Sequence[float]]] = {
    # From docs/gen-ai/gen-ai-metrics.md at fe5608e: the YAML does not carry bucket advice.
    "gen_ai.client.token.usage": [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
                                  67108864],
    "gen_ai.client.operation.duration": [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                                         40.96, 81.92],
    "gen_ai.client.operation.time_to_first_chunk": [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12,
                                                    10.24, 20.48, 40.96, 81.92],
    "gen_ai.client.operation.time_per_output_chunk": [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12,
                                                      10.24, 20.48, 40.96, 81.92],
    "gen_ai.invoke_agent.duration": [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6],
    "gen_ai.invoke_agent.inference_calls": [1, 2, 4, 8, 16, 32, 64, 128],
    "gen_ai.invoke_agent.tool_calls": [1, 2, 4, 8, 16, 32, 64, 128],
    "gen_ai.execute_tool.duration": [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96,
                                     81.92],
    "gen_ai.workflow.duration": [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200],
    # From docs/gen-ai/mcp.md ("SHOULD be specified with ExplicitBucketBoundaries of ...").
    "mcp.client.operation.duration": [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    "mcp.client.session.duration": [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
}  # fmt: skip

REFERENCE_IMPLEMENTATION_KEYS: Final[Mapping[str, str]] = {
    # Not in the conventions: opentelemetry-util-genai 1.3b0's upload completion hook
    # (``_upload/completion_hook.py``) puts these on the span when content is written to storage;
    # the plugin writes the same names (``content_upload``) so readers of either find the files.
    "gen_ai.input.messages_ref": "string",
    "gen_ai.output.messages_ref": "string",
    "gen_ai.system_instructions_ref": "string",
    "gen_ai.tool.definitions_ref": "string",
}

CLOSED_ENUMS: Final = frozenset({"gen_ai.token.type"})
INFERENCE_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
SPAN_NAME_TARGET: Final[Mapping[str, str]] = {
    # span type -> the attribute after the operation in the span name
    "gen_ai.inference.client": "gen_ai.request.model",
    "gen_ai.embeddings.client": "gen_ai.request.model",
    "gen_ai.retrieval.client": "gen_ai.data_source.id",
    "gen_ai.create_agent.client": "gen_ai.agent.name",
    "gen_ai.invoke_agent.client": "gen_ai.agent.name",
    "gen_ai.invoke_agent.internal": "gen_ai.agent.name",
    "gen_ai.execute_tool.internal": "gen_ai.tool.name",
    "gen_ai.invoke_workflow.internal": "gen_ai.workflow.name",
    "gen_ai.plan.internal": "gen_ai.agent.name",
}
KINDS: Final[Mapping[str, SpanKind]] = {
    "client": SpanKind.CLIENT,
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AttributeDef:
    key: str
    type: str  # string, int, double, boolean, string[], any, template[string], enum
    members: tuple[str, ...] = ()
    schema: str | None = None  # JSON schema file name for ``any`` content attributes


@dataclasses.dataclass(frozen=True)
class Requirement:
    level: str  # required, conditionally_required, recommended, opt_in
    condition: str = ""


@dataclasses.dataclass(frozen=True)
class SignalDef:
    """A span type or a metric, with its attributes resolved through ``ref_group``s."""

    name: str
    attributes: Mapping[str, Requirement]
    kind: str = ""  # spans
    instrument: str = ""  # metrics
    unit: str = ""  # metrics


@dataclasses.dataclass(frozen=True)
class SemconvModel:
    registry: Mapping[str, AttributeDef]
    spans: Mapping[str, SignalDef]
    metrics: Mapping[str, SignalDef]
    schemas: Mapping[str, Any]
    events: Mapping[str, SignalDef] = dataclasses.field(default_factory=dict)

    def attribute(self, key: str) -> AttributeDef | None:
        found = self.registry.get(key)
        if found is not None:
            return found
        for template in self.registry.values():
            if template.type.startswith("template[") and key.startswith(template.key + "."):
                return template
        core = CORE_ATTRIBUTE_TYPES.get(key) or REFERENCE_IMPLEMENTATION_KEYS.get(key)
        return AttributeDef(key, core) if core else None


def _requirement(raw: Any) -> Requirement | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return Requirement(raw)
    (level, condition), *_ = raw.items()
    return Requirement(str(level), str(condition))


def _resolve(
    entries: Iterable[Mapping[str, Any]], groups: Mapping[str, list[Mapping[str, Any]]]
) -> dict[str, Requirement]:
    """Attributes of a group or signal in declaration order; a later ref's level overrides."""
    resolved: dict[str, Requirement] = {}
    for entry in entries:
        if "ref_group" in entry:
            resolved.update(_resolve(groups[entry["ref_group"]], groups))
            continue
        key = entry["ref"]
        level = _requirement(entry.get("requirement_level"))
        if level is not None:
            resolved[key] = level
        else:
            resolved.setdefault(key, Requirement("recommended"))
    return resolved


@functools.cache
def load_model(directory: Path = MODEL_DIR) -> SemconvModel:
    def read(name: str) -> Any:
        return yaml.safe_load((directory / name).read_text(encoding="utf-8"))

    registry: dict[str, AttributeDef] = {}
    for attr in read("registry.yaml")["attributes"]:
        raw_type = attr["type"]
        schema = ((attr.get("annotations") or {}).get("type") or {}).get("json_schema")
        if isinstance(raw_type, Mapping):
            members = tuple(str(m["value"]) for m in raw_type["members"])
            registry[attr["key"]] = AttributeDef(attr["key"], "enum", members)
        else:
            registry[attr["key"]] = AttributeDef(
                attr["key"], str(raw_type), schema=Path(schema).name if schema else None
            )

    spans_doc, metrics_doc = read("spans.yaml"), read("metrics.yaml")
    groups = {g["id"]: g["attributes"] for doc in (spans_doc, metrics_doc) for g in doc.get("attribute_groups", [])}
    spans = {
        s["type"]: SignalDef(s["type"], _resolve(s["attributes"], groups), kind=s["kind"]) for s in spans_doc["spans"]
    }
    metrics = {
        m["name"]: SignalDef(m["name"], _resolve(m["attributes"], groups), instrument=m["instrument"], unit=m["unit"])
        for m in metrics_doc["metrics"]
    }
    schemas = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in directory.glob("gen-ai-*.json")}
    # An event may take a span's attributes whole (``ref_group: span.<type>``).
    groups.update({f"span.{s['type']}": s["attributes"] for s in spans_doc["spans"]})
    events = {
        e["name"]: SignalDef(e["name"], _resolve(e["attributes"], groups))
        for e in (read("events.yaml")["events"] if (directory / "events.yaml").exists() else [])
    }
    return SemconvModel(registry, spans, metrics, schemas, events)


# ---------------------------------------------------------------------------------------------
# Attribute values
# ---------------------------------------------------------------------------------------------


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _plain(value: Any) -> Any:
    """A log attribute's structure with the SDK's tuples as lists (JSON arrays, for jsonschema)."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _value_problem(
    model: SemconvModel, definition: AttributeDef, value: Any, *, structured: bool = False
) -> str | None:
    """Why ``value`` does not fit ``definition``, or None (``structured``: a log record's value)."""
    kind = definition.type
    if kind in ("string", "template[string]"):
        return None if isinstance(value, str) else f"must be a string, got {type(value).__name__} {value!r}"
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"must be an int, got {type(value).__name__} {value!r}"
    if kind == "double":
        return None if isinstance(value, float) else f"must be a double, got {type(value).__name__} {value!r}"
    if kind == "boolean":
        return None if isinstance(value, bool) else f"must be a boolean, got {type(value).__name__} {value!r}"
    if kind == "string[]":
        ok = isinstance(value, Sequence) and not isinstance(value, str) and all(isinstance(v, str) for v in value)
        return None if ok else f"must be a string array, got {value!r}"
    if kind == "enum":
        return _enum_problem(definition, value)
    if kind == "any":
        return _content_problem(model, definition, value, structured=structured)
    return None


def _enum_problem(definition: AttributeDef, value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be a string (enum), got {type(value).__name__} {value!r}"
    if value in definition.members:
        return None
    if definition.key in CLOSED_ENUMS:
        return f"{value!r} is not one of {list(definition.members)}"
    if value == "_OTHER":
        return "'_OTHER' is not a member (it is the fallback of error.type only)"
    near = [m for m in definition.members if _squash(m) == _squash(value)]
    if near:
        return f"{value!r} misspells the well-known value {near[0]!r}"
    return None


def _content_problem(
    model: SemconvModel, definition: AttributeDef, value: Any, *, structured: bool = False
) -> str | None:
    """A content attribute: JSON text on spans; on events (``structured``) the value itself."""
    if structured and not isinstance(value, str):
        document = _plain(value)
    elif not isinstance(value, str):
        return f"must be a JSON string, got {type(value).__name__}"
    else:
        try:
            document = json.loads(value)
        except json.JSONDecodeError as exc:
            return f"is not valid JSON ({exc.msg} at {exc.pos})"
    schema = model.schemas.get(definition.schema or "")
    if schema is None:
        return None
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(document), key=lambda e: list(e.path))
    if not errors:
        return None
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(root)"
    return f"does not validate against {definition.schema} at {where}: {first.message[:200]}"


def _check_attributes(
    model: SemconvModel,
    where: str,
    attributes: Mapping[str, Any],
    definition: SignalDef | None,
    extras: bool,
    *,
    usage_extras: bool = False,
    structured: bool = False,
) -> list[str]:
    problems: list[str] = []
    for key, value in attributes.items():
        known = model.attribute(key)
        if known is None:
            if key.startswith("gen_ai."):
                problems.append(f"{where}: unknown attribute {key} (not in the registry)")
            continue
        problem = _value_problem(model, known, value, structured=structured)
        if problem:
            problems.append(f"{where}: {key} {problem}")
        wanted = extras or (usage_extras and key.startswith("gen_ai.usage."))
        if wanted and definition is not None and key.startswith("gen_ai.") and not _listed(definition, key):
            problems.append(f"{where}: {key} is not part of the {definition.name} definition")
    if definition is not None:
        for key, requirement in definition.attributes.items():
            if requirement.level == "required" and key not in attributes:
                problems.append(f"{where}: missing required attribute {key}")
    return problems


def _listed(definition: SignalDef, key: str) -> bool:
    return key in definition.attributes or any(key.startswith(k + ".") for k in definition.attributes)


# ---------------------------------------------------------------------------------------------
# Spans
# ---------------------------------------------------------------------------------------------


def _span_definition(model: SemconvModel, operation: str, kind: SpanKind) -> tuple[SignalDef | None, list[str]]:
    if operation in INFERENCE_OPERATIONS:
        candidates = ["gen_ai.inference.client"]
    elif operation.endswith("_memory") or operation.endswith("_memory_store"):
        candidates = ["gen_ai.memory.client"]
    else:
        candidates = [t for t in model.spans if t.split(".")[1] == operation]
    candidates = [c for c in candidates if c in model.spans]
    for candidate in candidates:
        if KINDS[model.spans[candidate].kind] == kind:
            return model.spans[candidate], []
    if not candidates:
        return None, []  # a custom operation name: nothing to check it against
    wanted = " or ".join(model.spans[c].kind.upper() for c in candidates)
    return model.spans[candidates[0]], [f"span kind {kind.name}, the conventions want {wanted}"]


def check_spans(spans: Iterable[ReadableSpan], *, model: SemconvModel | None = None, extras: bool = False) -> list[str]:
    """Violations of the GenAI span conventions by the spans that carry ``gen_ai.operation.name``,
    and of the MCP client span's by those that carry ``mcp.method.name`` (``_check_mcp``)."""
    model = model or load_model()
    problems: list[str] = []
    for span in spans:
        attributes = dict(span.attributes or {})
        operation = attributes.get("gen_ai.operation.name")
        if "mcp.method.name" in attributes:
            problems += _check_mcp(model, span, attributes)
        if operation is None:
            continue
        where = f"span {span.name!r} ({operation})"
        if not isinstance(operation, str):
            problems.append(f"{where}: gen_ai.operation.name must be a string")
            continue
        definition, kind_problems = _span_definition(model, operation, span.kind)
        problems += [f"{where}: {p}" for p in kind_problems]
        problems += _check_attributes(model, where, attributes, definition, extras, usage_extras=True)
        if definition is None:
            continue
        problems += _check_span_name(where, span.name, operation, attributes, definition)
        problems += _check_conditions(where, span, attributes, definition)
    return problems


def _check_mcp(model: SemconvModel, span: ReadableSpan, attributes: Mapping[str, Any]) -> list[str]:
    """The MCP page's client span, alone (``{mcp.method.name}``, CLIENT, no ``gen_ai.operation.name``
    unless it is a ``tools/call``) or combined with ``execute_tool`` (its attributes on that span):
    attribute types and enum members, ``error.type`` iff ERROR, ``rpc.response.status_code`` only
    with an ``error.type`` (it is the JSON-RPC error code), ``jsonrpc.request.id`` never on a
    notification, ``server.port`` with ``server.address``, no ``mcp.session.id`` in the stateless era."""
    method = attributes["mcp.method.name"]
    where = f"span {span.name!r} (MCP {method})"
    problems = _check_attributes(model, where, attributes, None, extras=False)
    combined = attributes.get("gen_ai.operation.name") == "execute_tool" and method == "tools/call"
    if "gen_ai.operation.name" in attributes and method != "tools/call":
        problems.append(f"{where}: gen_ai.operation.name is set only for a tool call")
    if not combined:
        if span.kind is not SpanKind.CLIENT:
            problems.append(f"{where}: an MCP client span should be CLIENT, not {span.kind.name}")
        target = attributes.get("gen_ai.tool.name") or attributes.get("gen_ai.prompt.name")
        expected = f"{method} {target}" if target else str(method)
        if span.name != expected:
            problems.append(f"{where}: span name should be {expected!r} ('{{mcp.method.name}} {{target}}')")
        failed = span.status.status_code is StatusCode.ERROR
        if failed != ("error.type" in attributes):
            problems.append(f"{where}: error.type and an ERROR status go together")
    if "rpc.response.status_code" in attributes and "error.type" not in attributes:
        problems.append(f"{where}: rpc.response.status_code (a JSON-RPC error code) without error.type")
    if str(method).startswith("notifications/") and "jsonrpc.request.id" in attributes:
        problems.append(f"{where}: a notification has no jsonrpc.request.id")
    if "server.address" in attributes and "server.port" not in attributes:
        problems.append(f"{where}: server.address without server.port")
    if "mcp.session.id" in attributes and str(attributes.get("mcp.protocol.version", "")) >= "2026-07-28":
        problems.append(f"{where}: mcp.session.id in the stateless era (no session exists)")
    return problems


def _check_span_name(
    where: str, name: str, operation: str, attributes: Mapping[str, Any], definition: SignalDef
) -> list[str]:
    target_key = SPAN_NAME_TARGET.get(definition.name)
    target = attributes.get(target_key) if target_key else None
    expected = f"{operation} {target}" if target is not None else operation
    if name == expected:
        return []
    return [f"{where}: span name should be {expected!r} ('{{gen_ai.operation.name}} {{{target_key}}}')"]


def _check_conditions(
    where: str, span: ReadableSpan, attributes: Mapping[str, Any], definition: SignalDef
) -> list[str]:
    problems: list[str] = []
    failed = span.status.status_code is StatusCode.ERROR
    if "error.type" in definition.attributes:
        if failed and "error.type" not in attributes:
            problems.append(f"{where}: status ERROR but no error.type (conditionally required on errors)")
        if not failed and "error.type" in attributes:
            problems.append(f"{where}: error.type set but the status is not ERROR")
    if definition.name == "gen_ai.inference.client" and "gen_ai.request.model" not in attributes:
        problems.append(f"{where}: missing gen_ai.request.model (conditionally required: the model is known)")
    if "server.address" in attributes and "server.port" not in attributes and "server.port" in definition.attributes:
        problems.append(f"{where}: server.address without server.port (conditionally required)")
    if attributes.get("gen_ai.conversation.compacted") is False:
        problems.append(f"{where}: gen_ai.conversation.compacted=false (the conventions: set only true)")
    return problems


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------


def check_metrics(data: MetricsData | None, *, model: SemconvModel | None = None) -> list[str]:
    """Violations of the GenAI metric conventions by the ``gen_ai.*`` and ``mcp.*`` metrics in ``data``."""
    model = model or load_model()
    problems: list[str] = []
    if data is None:
        return problems
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name.startswith(("gen_ai.", "mcp.")):
                    problems += _check_metric(model, metric.name, metric.unit or "", metric.data)
    return problems


def _check_metric(model: SemconvModel, name: str, unit: str, data: Any) -> list[str]:
    where = f"metric {name}"
    definition = model.metrics.get(name)
    if definition is None:
        return [f"{where}: not a metric of the conventions"]
    problems: list[str] = []
    instrument = (
        "histogram"
        if isinstance(data, Histogram)
        else ("counter" if data.is_monotonic else "updowncounter")
        if isinstance(data, Sum)
        else "gauge"
    )
    if instrument != definition.instrument:
        problems.append(f"{where}: instrument {instrument}, the conventions want {definition.instrument}")
    if unit != definition.unit:
        problems.append(f"{where}: unit {unit!r}, the conventions want {definition.unit!r}")
    advice = BUCKET_ADVICE.get(name)
    for point in data.data_points:
        bounds = getattr(point, "explicit_bounds", None)
        if advice is not None and bounds is not None and [float(b) for b in bounds] != [float(a) for a in advice]:
            problems.append(f"{where}: bucket boundaries {list(bounds)}, the advice is {list(advice)}")
        attributes = dict(point.attributes or {})
        problems += _check_attributes(model, where, attributes, definition, extras=False)
        if name.startswith("mcp.") and "mcp.session.id" in attributes:
            problems.append(f"{where}: mcp.session.id is not a metric attribute (one series per session)")
    return problems


# ---------------------------------------------------------------------------------------------
# Events (log records)
# ---------------------------------------------------------------------------------------------


def check_log_records(records: Iterable[Any], *, model: SemconvModel | None = None) -> list[str]:
    """Violations of the GenAI event conventions by log records whose ``event_name`` starts with
    ``gen_ai.``: SDK ``ReadableLogRecord``s (their ``log_record``) or API ``LogRecord``s."""
    model = model or load_model()
    problems: list[str] = []
    for item in records:
        record = getattr(item, "log_record", item)
        name = getattr(record, "event_name", None)
        if not isinstance(name, str) or not name.startswith("gen_ai."):
            continue
        where = f"event {name}"
        definition = model.events.get(name)
        if definition is None:
            problems.append(f"{where}: not an event of the conventions")
            continue
        attributes = dict(record.attributes or {})
        problems += _check_attributes(model, where, attributes, definition, extras=False, structured=True)
        if name == "gen_ai.client.inference.operation.details":
            if "gen_ai.request.model" not in attributes:
                problems.append(f"{where}: missing gen_ai.request.model (conditionally required: the model is known)")
            if "server.address" in attributes and "server.port" not in attributes:
                problems.append(f"{where}: server.address without server.port (conditionally required)")
    return problems
