"""``user.id`` like the conversation id, and ``gen_ai.agent.version`` where the user gives one.

``user.id`` (the core convention; the GenAI model defines no user attribute) comes from the spec's
``metadata["user_id"]``, or from ``OtelHooks(user_id=...)``: a fixed value, or a function of the
metadata. It goes on every span of the run, as ``gen_ai.conversation.id`` does. flowra's agents
carry no version, so ``gen_ai.agent.version`` is written only from ``agent_version=`` (a mapping or
a function of the agent's flowra path), on that agent's ``invoke_agent`` span.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.core import semconv
from tests.both_lines.line import MakeHooks, S


async def weather_chat(make_otel_hooks: MakeHooks, **metadata: Any) -> None:
    options = metadata.pop("options", {})
    call = S.tool_calls(("c1", "get_weather", {"city": "Paris"}))
    await S.weather_run(make_otel_hooks(**options), call, S.answer("Sunny."), metadata=metadata)


def by_span(exporter: InMemorySpanExporter, key: str) -> dict[str, Any]:
    return {s.name: (s.attributes or {}).get(key) for s in exporter.get_finished_spans()}


EVERY_SPAN = ("invoke_agent assistant", "chat sonnet-4-5", "execute_tool get_weather")


async def test_the_user_id_in_the_spec_metadata_is_on_every_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    await weather_chat(make_otel_hooks, user_id="u-42", conversation_id="c-7")
    assert by_span(span_exporter, semconv.USER_ID) == dict.fromkeys(EVERY_SPAN, "u-42")
    assert by_span(span_exporter, semconv.GEN_AI_CONVERSATION_ID) == dict.fromkeys(EVERY_SPAN, "c-7")


async def test_without_a_user_id_no_span_has_one(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    await weather_chat(make_otel_hooks, tenant="acme")
    assert by_span(span_exporter, semconv.USER_ID) == dict.fromkeys(EVERY_SPAN)


@pytest.mark.parametrize(
    ("option", "metadata", "expected"),
    [
        pytest.param("service-account", {"user_id": "u-42"}, "service-account", id="fixed-value-wins"),
        pytest.param(lambda md: f"user-{md['account']}", {"account": 7}, "user-7", id="function-of-metadata"),
        pytest.param(lambda md: None, {"user_id": "u-42"}, None, id="function-says-none"),
        pytest.param(lambda md: 12345, {}, "12345", id="function-returns-an-int"),
    ],
)
async def test_the_user_id_option(
    option: str | Callable[[Mapping[str, Any]], Any],
    metadata: dict[str, Any],
    expected: str | None,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
) -> None:
    await weather_chat(make_otel_hooks, options={"user_id": option}, **metadata)
    assert by_span(span_exporter, semconv.USER_ID) == dict.fromkeys(EVERY_SPAN, expected)


@pytest.mark.parametrize(
    "option",
    [
        pytest.param({S.AGENT_PATH: "2026.11.1"}, id="mapping-by-path"),
        pytest.param(lambda path: "2026.11.1" if path.startswith("assistant") else None, id="function-of-path"),
    ],
)
async def test_the_agent_version_option_goes_on_that_agents_span_only(
    option: Any, make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    await weather_chat(make_otel_hooks, options={"agent_version": option})
    assert by_span(span_exporter, semconv.GEN_AI_AGENT_VERSION) == {
        "invoke_agent assistant": "2026.11.1",
        "chat sonnet-4-5": None,
        "execute_tool get_weather": None,
    }


async def test_each_agent_gets_its_own_version_and_none_without_one(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    await S.research_run(make_otel_hooks(agent_version={S.AGENT_PATH: "3"}))
    versions = {
        str((s.attributes or {})[semconv.FLOWRA_AGENT_PATH]): (s.attributes or {}).get(semconv.GEN_AI_AGENT_VERSION)
        for s in span_exporter.get_finished_spans()
        if s.name.startswith("invoke_agent")
    }
    assert versions == {path: "3" if path == S.AGENT_PATH else None for path in S.RESEARCH_AGENT_PATHS}


async def test_no_agent_version_by_default(make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter) -> None:
    await weather_chat(make_otel_hooks)
    assert by_span(span_exporter, semconv.GEN_AI_AGENT_VERSION) == dict.fromkeys(EVERY_SPAN)
