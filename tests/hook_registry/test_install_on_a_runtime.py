"""``OtelHooks().install(runtime)`` on flowra 0.0.3 - 0.0.8: the one line the README shows for
either flowra line. It adds the hooks to the ``HookRegistry`` the runtime hands its agents, and
gives a runtime that has none (0.0.3 - 0.0.7, when the app passed none) one, as a service, which
``uninstall()`` takes away again."""

from __future__ import annotations

from collections.abc import Callable

from flowra.agent import HookRegistry
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from tests import span_tree
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    get_weather,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)

MakeHooks = Callable[..., OtelHooks]
TREE: list[object] = [
    (
        "invoke_agent assistant",
        [("chat gpt-4o", []), ("execute_tool get_weather", []), ("chat gpt-4o", [])],
    )
]


def script() -> ScriptedProvider:
    return ScriptedProvider([tool_calls_response([("c1", "get_weather", {"city": "Oslo"})]), text_response("Sunny.")])


async def test_install_adds_the_hooks_to_the_runtimes_registry(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(script(), tools, model="gpt-4o")  # its registry carries no OtelHooks
        make_otel_hooks().install(runtime)
        await run_tool_loop(runtime, "Weather in Oslo?")
    assert span_tree.shape(span_tree.build(span_exporter.get_finished_spans())) == TREE


async def test_install_gives_a_runtime_without_a_registry_one(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(script(), tools, model="gpt-4o")
        services = runtime._AgentRuntime__services  # type: ignore[attr-defined]
        del services[HookRegistry]  # an app that gave the runtime no registry (0.0.3 - 0.0.7 then make none)
        make_otel_hooks().install(runtime)
        assert isinstance(services[HookRegistry], HookRegistry)
        await run_tool_loop(runtime, "Weather in Oslo?")
    assert span_tree.shape(span_tree.build(span_exporter.get_finished_spans())) == TREE


async def test_without_install_the_runtime_is_not_traced(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    """The paired negative: the same runtime, no install, no spans (the patches alone trace nothing)."""
    make_otel_hooks()  # built (the patches are in) but never installed
    async with tool_registry(get_weather) as tools:
        await run_tool_loop(tool_loop_runtime(script(), tools, model="gpt-4o"), "Weather in Oslo?")
    assert span_exporter.get_finished_spans() == ()


async def test_uninstall_takes_away_the_registry_install_gave(make_otel_hooks: MakeHooks) -> None:
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(script(), tools, model="gpt-4o")
        services = runtime._AgentRuntime__services  # type: ignore[attr-defined]
        del services[HookRegistry]  # an app that gave the runtime no registry
        installation = make_otel_hooks().install(runtime)
        assert isinstance(services[HookRegistry], HookRegistry)
        installation.uninstall()
        assert HookRegistry not in services  # as the app left it
