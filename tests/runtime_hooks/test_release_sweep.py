"""The release sweep: one real traced run that exercises every guarantee, seconds per release.

``./dev test`` runs this module on every flowra release of the modern line (0.0.47 - 0.0.93,
each installed in turn into one shared environment); the whole modern suite runs on the era
boundaries and the full suite on the home release. One ``ChatAgent`` run, content on: the model
asks for two ``probe`` calls and the ``research`` agent (used as a tool) in one message, so they
run in parallel; the researcher looks a customer up, and the app's ``AfterToolCallEvent`` hook,
which the researcher registers scoped to its tool loop by agent type (the way every release
0.0.47 - 0.0.93 lets an agent scope a hook; flowra runs scoped hooks after every global one, the
tracing's included, and wraps this one in an ``event_wrapper`` of its own before 0.0.56), masks
the SSN before any model sees it. Checked on each release:

* the span tree: every tool span under the chat's agent, the researcher's agent under its tool's
  span, its own chat and tool spans under it, one trace, every span ended once;
* content after every hook: the masked record on the tool span, the ledger naming the hook, no
  SSN anywhere (spans and their events);
* the OpenTelemetry context: each ``probe`` saw its own ``execute_tool`` span current;
* metrics: operation duration and token usage for the chats and the tools' agent;
* and that the release's own requirements are installed (the sweep installs it without them).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

from flowra.agent import Event
from flowra.lib.turn.hook_events import AfterToolCallEvent
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from packaging.requirements import Requirement

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.testing import assert_no_leak
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced, wrapped_result
from tests.runtime_hooks.support import (
    CURRENT_SPAN_IN_TOOL,
    FLOWRA_VERSION,
    REDACTED,
    SSN,
    ResearcherAgent,
    ResearcherSetup,
    ScriptedProvider,
    chat_runtime,
    lookup_customer,
    probe,
    replace_result_text,
    research_tool,
    run_chat,
    text_response,
    tool_calls_response,
)

MakeHooks = Callable[..., OtelHooks]
CHAT = "chat sonnet-4-5"


def redact_ssn(event: Event[AfterToolCallEvent]) -> None:
    """The app's redaction hook (scoped to the researcher's tool loop, registered after tracing)."""
    event.data.result = replace_result_text(event.data.result, lambda text: text.replace(SSN, REDACTED))


def metric_points(reader: InMemoryMetricReader) -> dict[str, int]:
    """metric name -> how many data points (attribute sets) it has."""
    data = reader.get_metrics_data()
    out: dict[str, int] = {}
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out[metric.name] = out.get(metric.name, 0) + len(list(metric.data.data_points))
    return out


async def test_one_traced_run_keeps_every_guarantee_on_this_release(
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    CURRENT_SPAN_IN_TOOL.clear()
    provider = ScriptedProvider(
        tool_calls_response(
            ("p1", "probe", {"name": "a"}),
            ("p2", "probe", {"name": "b"}),
            ("r1", "research", {"question": "Who is Ada?"}),
        ),
        text_response("done"),
    )
    researcher = ScriptedProvider(
        tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), text_response("Ada is a customer")
    )
    setup = ResearcherSetup(provider=researcher, tools=(lookup_customer,), hooks=((AfterToolCallEvent, redact_ssn),))
    runtime = chat_runtime(
        provider, research_tool, probe, agents={"researcher": ResearcherAgent}, services={ResearcherSetup: setup}
    )
    traced(make_otel_hooks, runtime, capture_content=True)

    result = await run_chat(runtime, "Look around")
    assert result.response == "done", FLOWRA_VERSION

    spans = span_exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}

    def parent_name(span: Any) -> str | None:
        parent = by_id.get(span.parent.span_id) if span.parent is not None else None
        return parent.name if parent is not None else None

    edges = sorted((s.name, parent_name(s)) for s in spans)
    assert edges == sorted(
        [
            ("invoke_agent assistant", None),
            (CHAT, "invoke_agent assistant"),
            (CHAT, "invoke_agent assistant"),
            ("execute_tool probe", "invoke_agent assistant"),
            ("execute_tool probe", "invoke_agent assistant"),
            ("execute_tool research", "invoke_agent assistant"),
            ("invoke_agent researcher", "execute_tool research"),
            ("invoke_agent researcher/turn", "invoke_agent researcher"),
            (CHAT, "invoke_agent researcher/turn"),
            (CHAT, "invoke_agent researcher/turn"),
            ("execute_tool lookup_customer", "invoke_agent researcher/turn"),
        ]
    ), edges
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1

    # the OTel context: each probe ran with its own execute_tool span current
    probes = {dict(s.attributes or {})[semconv.GEN_AI_TOOL_CALL_ID]: s for s in spans if s.name == "execute_tool probe"}
    assert {"a": probes["p1"].context.span_id, "b": probes["p2"].context.span_id} == CURRENT_SPAN_IN_TOOL

    # content after every hook: the masked record, the ledger naming the hook, no SSN anywhere
    (lookup,) = [s for s in spans if s.name == "execute_tool lookup_customer"]
    attrs = dict(lookup.attributes or {})
    assert attrs[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result(f"Ada: SSN {REDACTED}, card 4111 1111 1111 1111")
    assert attrs["flowra.redaction.result.handlers"] == (f"{__name__}.redact_ssn",)
    assert_no_leak(spans, [SSN])

    # metrics: the chats' durations and token usage, the agents', the tools', the redaction
    points = metric_points(metric_reader)
    for name in (
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.invoke_agent.duration",
        "gen_ai.execute_tool.duration",
        "flowra.redactions",
    ):
        assert points.get(name, 0) >= 1, (name, points)
    assert_all_ended(ledger, span_exporter)


def test_this_releases_requirements_are_installed() -> None:
    """The sweep installs each release without its dependencies (one environment for all, from the
    lock): every release 0.0.47 - 0.0.93 asks for httpx, jsonschema and marshmallow-recipe, which
    the lock satisfies; a release that asked for more would fail here, not in a confusing import."""
    for line in importlib.metadata.requires("flowra") or []:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue  # an extra's (a provider SDK): not installed by an app that does not ask for it
        installed = importlib.metadata.version(requirement.name)
        assert requirement.specifier.contains(installed, prereleases=True), (line, installed, FLOWRA_VERSION)
