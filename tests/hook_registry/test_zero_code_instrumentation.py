"""Zero-code: ``FlowraInstrumentor`` in-process, and an unmodified app under ``opentelemetry-instrument``."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flowra.agent import HookRegistry
from flowra.lib.tool_loop import BeforeLLMCallEvent, ToolLoopStatus
from flowra.llm import LLMProvider
from flowra.runtime import AgentRuntime
from flowra.runtime.engine import Engine
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import patches, registry_view, span_book
from flowra_otel.adapters.hook_registry._flowra import registry_handlers, services_of
from flowra_otel.adapters.hook_registry.hooks import HookRegistryAdapter
from flowra_otel.adapters.hook_registry.instrumentor import NO_PROVIDER_WARNING
from flowra_otel.core import semconv
from flowra_otel.instrumentor import FlowraInstrumentor
from tests import span_tree
from tests.hook_registry.conftest import wrapped_result
from tests.hook_registry.flowra_support import (
    ScriptedProvider,
    SummarizerAgent,
    SummarizeSpec,
    get_weather,
    run_agent,
    run_tool_loop,
    specialist_runtime,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
)
from tests.otlp_receiver import OtlpReceiver
from tests.zero_code import Upstream, app_environment

PATCHED: tuple[tuple[type, str], ...] = (
    (HookRegistry, "__init__"),
    (HookRegistry, "emit"),
    (Engine, "_Engine__execute_node"),
    (AgentRuntime, "run"),
    (AgentRuntime, "resume"),
)

EXPECTED_SHAPE: list[Any] = [
    (
        "invoke_agent assistant",
        [("chat sonnet-4-5", []), ("execute_tool get_weather", []), ("chat sonnet-4-5", [])],
    )
]


@pytest.fixture
def originals() -> dict[tuple[type, str], Any]:
    """The class attributes flowra itself defines (earlier tests' OtelHooks patched them: undo that
    first; the next OtelHooks built re-installs the patches)."""
    patches.uninstall()
    assert not patches.installed()
    return {(cls, name): cls.__dict__[name] for cls, name in PATCHED}


@pytest.fixture
def instrumentor() -> Iterator[FlowraInstrumentor]:
    inst = FlowraInstrumentor()
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()


def is_instrumented(instrumentor: FlowraInstrumentor) -> bool:
    """A call, not the property itself: mypy would otherwise narrow it across instrument() calls."""
    return bool(instrumentor.is_instrumented_by_opentelemetry)


def _script() -> ScriptedProvider:
    return ScriptedProvider(
        [tool_calls_response([("c1", "get_weather", {"city": "Oslo"})]), text_response("Cold in Oslo.")]
    )


async def _run_on(registry: HookRegistry | None) -> None:
    async with tool_registry(get_weather) as tools:
        result = await run_tool_loop(tool_loop_runtime(_script(), tools, registry), "Weather in Oslo?")
    assert result.status == ToolLoopStatus.COMPLETED


# ------------------------------------------------------------------------------------ in-process
def test_entry_point_names_the_instrumentor() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="opentelemetry_instrumentor") if e.name == "flowra"]
    assert entry.value == "flowra_otel.instrumentor:FlowraInstrumentor"
    assert entry.load() is FlowraInstrumentor
    assert FlowraInstrumentor().instrumentation_dependencies() == ("flowra >= 0.0.3, < 0.0.9",)
    assert FlowraInstrumentor()._check_dependency_conflicts() is None  # the installed flowra is in range


def test_is_a_singleton_without_instance_state(instrumentor: FlowraInstrumentor) -> None:
    assert FlowraInstrumentor() is instrumentor
    assert instrumentor.hooks is None


async def test_instrument_uninstrument_round_trip(
    instrumentor: FlowraInstrumentor,
    originals: dict[tuple[type, str], Any],
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
) -> None:
    before = HookRegistry()  # created before instrumenting: left alone
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert is_instrumented(instrumentor)
    assert patches.installed()
    assert HookRegistry.__dict__["__init__"] is not originals[(HookRegistry, "__init__")]
    assert not before.has_handlers(BeforeLLMCallEvent)
    hooks = instrumentor.hooks
    assert isinstance(hooks, HookRegistryAdapter)

    # A registry created now carries the shared OtelHooks: the app adds nothing.
    registry = HookRegistry()
    assert registry.has_handlers(BeforeLLMCallEvent)
    await _run_on(registry)
    assert span_tree.shape(span_tree.build(span_exporter.get_finished_spans())) == EXPECTED_SHAPE
    assert metric_reader.get_metrics_data() is not None

    # The runtime's own default registry (no HookRegistry service given) is covered too.
    span_exporter.clear()
    await _run_on(None)
    assert span_tree.shape(span_tree.build(span_exporter.get_finished_spans())) == EXPECTED_SHAPE

    instrumentor.uninstrument()
    assert not is_instrumented(instrumentor)
    assert instrumentor.hooks is None
    for (cls, name), original in originals.items():
        assert cls.__dict__[name] is original, f"{cls.__name__}.{name} is not flowra's own function again"
    assert not patches.installed()
    assert "__init_subclass__" not in LLMProvider.__dict__
    assert not hasattr(ScriptedProvider.__dict__["call"], "__wrapped__")

    span_exporter.clear()
    after = HookRegistry()
    assert not after.has_handlers(BeforeLLMCallEvent)
    await _run_on(after)
    assert span_exporter.get_finished_spans() == ()

    # Instrumenting again works (the singleton kept no stale state).
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    await _run_on(None)
    assert span_tree.shape(span_tree.build(span_exporter.get_finished_spans())) == EXPECTED_SHAPE


async def test_options_are_passed_to_the_hooks(
    instrumentor: FlowraInstrumentor,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    instrumentor.instrument(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=True,
        agent_name={"assistant": "Weather Bot"},
    )
    await _run_on(None)
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    assert "invoke_agent Weather Bot" in spans
    tool = spans["execute_tool get_weather"]
    assert (tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("Sunny, 21 C in Oslo")


async def test_an_apps_own_otel_hooks_replaces_the_instrumentors(
    instrumentor: FlowraInstrumentor,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    """The app's explicit options (here: capture on, a scrubber) win over zero-code defaults."""
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False)
    registry = HookRegistry()  # carries the instrumentor's OtelHooks
    registry.add(
        OtelHooks(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_content=True,
            redact=lambda text: text.replace("Oslo", "[CITY]"),
        )
    )
    await _run_on(registry)
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    assert len([s for s in span_exporter.get_finished_spans() if s.name.startswith("invoke_agent")]) == 1
    tool = spans["execute_tool get_weather"]
    assert (tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("Sunny, 21 C in [CITY]")


def test_invalid_options_fail_at_instrument_time(instrumentor: FlowraInstrumentor) -> None:
    with pytest.raises(TypeError, match="capture_content"):
        instrumentor.instrument(capture_content=3)  # a content mode's name or a bool
    assert not is_instrumented(instrumentor)
    assert not hasattr(HookRegistry.__dict__["__init__"], "__wrapped__")
    assert instrumentor.hooks is None


async def test_child_registries_trace_each_event_once(
    instrumentor: FlowraInstrumentor,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    """Every registry (parent and forwarding child) carries OtelHooks; each event is traced once."""
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    parent = HookRegistry()
    child = OtelHooks.child_registry(parent, agent_path="planner")
    await _run_on(child)
    spans = span_tree.build(span_exporter.get_finished_spans())
    assert span_tree.shape(spans) == [
        (
            "invoke_agent planner",
            [("chat sonnet-4-5", []), ("execute_tool get_weather", []), ("chat sonnet-4-5", [])],
        )
    ]


CONTENT_KEYS = frozenset(
    {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_DEFINITIONS,
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
    }
)
APP_STAMP = {"app.tracer": "the app's own OtelHooks"}


def _first_sees_wins(current: Any, candidate: Any) -> bool:
    """The negative's ownership rule: the first OtelHooks to see an event traces it, whoever it is."""
    return current is None


def _first_on_registry(node: Any) -> Any:
    """The negative's owner of a direct provider call: the first OtelHooks on the node's registry."""
    registry = services_of(node).get(HookRegistry)
    for handler in registry_handlers(registry, BeforeLLMCallEvent) or () if registry is not None else ():
        if registry_view.is_plugin_handler(handler):
            return handler.__self__
    return None


@pytest.mark.parametrize("app_wins", [True, False], ids=["app_wins", "first_sees_wins"])
async def test_a_child_registry_is_traced_with_the_apps_options_not_zero_codes(
    app_wins: bool,
    instrumentor: FlowraInstrumentor,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Content capture on through the environment (zero-code), the app's own ``OtelHooks`` off,
    on the parent of a ``child_registry``: the child, made while instrumented, carries the
    instrumentor's ``OtelHooks`` too and sees every event first. The app's options apply: no
    content, on the tool loop's spans and on a custom agent's direct provider call alike."""
    if not app_wins:
        monkeypatch.setattr(span_book, "takes_over", _first_sees_wins)
        monkeypatch.setattr(span_book, "owner_on", _first_on_registry)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    parent = HookRegistry()  # carries the instrumentor's OtelHooks (capture on, from the environment)
    app = OtelHooks(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False, attributes=APP_STAMP
    )
    parent.add(app)  # replaces the instrumentor's on the parent
    child = OtelHooks.child_registry(parent, agent_path="planner")  # made while instrumented: it has both
    await _run_on(child)
    summarizer = ScriptedProvider([text_response("Oslo is cold.")])
    await run_agent(specialist_runtime(summarizer, child), SummarizerAgent, SummarizeSpec(text="Oslo, -5 C"))

    spans = span_exporter.get_finished_spans()
    assert span_tree.shape(span_tree.build(spans)) == [
        ("invoke_agent planner", [("chat sonnet-4-5", []), ("execute_tool get_weather", []), ("chat sonnet-4-5", [])]),
        ("chat sonnet-4-5", []),  # the custom agent's direct call
    ]
    recorded = {s.name: sorted(CONTENT_KEYS & set(s.attributes or {})) for s in spans}
    stamped = {(s.attributes or {}).get("app.tracer") for s in spans}
    if app_wins:
        assert [sorted(CONTENT_KEYS & set(s.attributes or {})) for s in spans] == [[]] * 5
        assert stamped == {APP_STAMP["app.tracer"]}  # every span is the app's OtelHooks'
    else:  # the negative: the instrumentor's OtelHooks traces the child, with content
        assert recorded["invoke_agent planner"] == [semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES]
        assert recorded["execute_tool get_weather"] == [
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
            semconv.GEN_AI_TOOL_CALL_RESULT,
        ]
        direct = [s for s in spans if s.parent is None and s.name == "chat sonnet-4-5"]
        assert [sorted(CONTENT_KEYS & set(s.attributes or {})) for s in direct] == [
            [semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES, semconv.GEN_AI_SYSTEM_INSTRUCTIONS]
        ]
        assert stamped == {None}


# ------------------------------------------------------------------------------------ opentelemetry-instrument
APP = '''
"""A plain flowra app: it knows nothing of OpenTelemetry or flowra_otel."""

import asyncio
import inspect

from flowra.lib import LLMConfig
from flowra.lib.tool_loop import ToolLoopAgent, ToolLoopConfig, ToolLoopSpec
from flowra.llm import AssistantMessage, LLMProvider, LLMResponse, StopReason, TextBlock, ToolUseBlock, Usage
from flowra.llm import LLMProvider
from flowra.runtime import AgentRuntime
from flowra.tools import LocalTool, ToolDefinition, ToolRegistry, ToolResult


class CannedLLM(LLMProvider):
    def __init__(self):
        self.calls = 0

    async def call(self, request):
        self.calls += 1
        if self.calls == 1:
            blocks = [ToolUseBlock(id="t1", name="get_time", input={"city": "Oslo"})]
            return LLMResponse(
                message=AssistantMessage(blocks=blocks),
                stop_reason=StopReason.TOOL_USE,
                usage=Usage(input_tokens=12, output_tokens=3),
            )
        return LLMResponse(
            message=AssistantMessage(blocks=[TextBlock(text="It is noon in Oslo.")]),
            stop_reason=StopReason.END_TURN,
            usage=Usage(input_tokens=20, output_tokens=6),
        )


async def get_time(ctx):
    return ToolResult(content=f"12:00 in {ctx.input['city']}")


TIME_TOOL = LocalTool(
    definition=ToolDefinition(
        name="get_time",
        description="The local time in a city.",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    handler=get_time,
)


async def main():
    async with await ToolRegistry.create([TIME_TOOL]) as tools:
        runtime = AgentRuntime(
            agents={"assistant": ToolLoopAgent},
            services={
                LLMProvider: CannedLLM(),
                ToolRegistry: tools,
                ToolLoopConfig: ToolLoopConfig(llm_config=LLMConfig(model="openai/gpt-4o"), session_messages=[]),
            },
        )
        kwargs = {"agent": "assistant", "spec": ToolLoopSpec(user_message="What time is it in Oslo?")}
        if "step" in inspect.signature(runtime.run).parameters:  # flowra < 0.0.5
            kwargs["step"] = "start"
        result = await runtime.run(**kwargs)
    print("answer:", result.result_message.blocks[0].text)


asyncio.run(main())
'''


def _launch(tmp_path: Path, env: dict[str, str], *, upstream: Upstream = "absent") -> subprocess.CompletedProcess[str]:
    """The app under ``opentelemetry-instrument`` in an app environment (tests/zero_code.py): this
    package, no other instrumentation, and opentelemetry-distro where ``upstream`` says."""
    app_env = app_environment(tmp_path, upstream=upstream)
    app = app_env.app_dir / "app.py"
    app.write_text(textwrap.dedent(APP), encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTHONPATH", "VIRTUAL_ENV"))}
    if app_env.pythonpath is not None:
        clean["PYTHONPATH"] = app_env.pythonpath
    return subprocess.run(
        [str(app_env.bin / "opentelemetry-instrument"), str(app_env.python), str(app)],
        cwd=app_env.app_dir,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_unmodified_app_under_opentelemetry_instrument(tmp_path: Path) -> None:
    """Under opentelemetry-distro's distro and configurator, chosen by name (ours are installed
    too, found after them): the instrumentor traces with whatever set the process up, and says
    nothing, as the choice was explicit. (Our own distro: test_zero_code_follows_configure_telemetry.)"""
    assert "flowra_otel" not in APP.replace(
        '"""A plain flowra app: it knows nothing of OpenTelemetry or flowra_otel."""', ""
    )
    with OtlpReceiver() as rx:
        env = {
            "OTEL_PYTHON_DISTRO": "distro",
            "OTEL_PYTHON_CONFIGURATOR": "configurator",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_ENDPOINT": rx.grpc_endpoint,
            "OTEL_SERVICE_NAME": "zero-code-app",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        proc = _launch(tmp_path, env, upstream="first")
        assert proc.returncode == 0, proc.stderr
        assert "answer: It is noon in Oslo." in proc.stdout
        assert "spans go nowhere" not in proc.stderr  # the distro installed a provider
        assert "flowra_otel" not in proc.stderr, proc.stderr  # no internal error, no warning
        spans = rx.wait_for_spans(4, timeout=10)
    names = sorted(s.name for s in spans)
    assert names == ["chat gpt-4o", "chat gpt-4o", "execute_tool get_time", "invoke_agent assistant"], names
    (agent,) = [s for s in spans if s.name == "invoke_agent assistant"]
    assert agent.is_root
    assert all(s.parent_span_id == agent.span_id for s in spans if s is not agent)
    assert {s.resource_attributes["service.name"] for s in spans} == {"zero-code-app"}
    assert {s.scope_name for s in spans} == {semconv.INSTRUMENTATION_NAME}
    tool = next(s for s in spans if s.name == "execute_tool get_time")
    assert tool.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "t1"
    chat = next(s for s in spans if s.name == "chat gpt-4o")
    assert chat.attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    # Content capture is opt-in, also zero-code.
    assert semconv.GEN_AI_TOOL_CALL_RESULT not in tool.attributes


def test_opentelemetry_instrument_without_a_configurator_says_how_to_fix_it(tmp_path: Path) -> None:
    """As with no configurator installed: instrumentors load, no provider is installed. Naming a
    configurator that does not exist is the same situation."""
    proc = _launch(
        tmp_path,
        {
            "OTEL_PYTHON_CONFIGURATOR": "not-installed",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
            "OTEL_SERVICE_NAME": "zero-code-app",
        },
    )
    assert proc.returncode == 0, proc.stderr
    assert "answer: It is noon in Oslo." in proc.stdout  # the app is unaffected
    assert proc.stderr.count(NO_PROVIDER_WARNING) == 1, proc.stderr


NO_PROVIDER_APP = """
    import logging, sys
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    from flowra.agent import HookRegistry
    from flowra_otel.instrumentor import FlowraInstrumentor

    SETUP
    FlowraInstrumentor().instrument(**KWARGS)
    AFTER
    HookRegistry()
    HookRegistry()
    FlowraInstrumentor().uninstrument()
    FlowraInstrumentor().instrument(**KWARGS)
    HookRegistry()
    print("done")
"""


@pytest.mark.parametrize(
    ("setup", "kwargs", "after", "env", "warnings"),
    [
        pytest.param("", "{}", "", {}, 1, id="nothing-installed-warns-once"),
        pytest.param(
            "",
            "{}",
            "from flowra_otel.export import configure_telemetry; configure_telemetry(console=False)",
            {},
            0,
            id="configured-after-instrument",
        ),
        pytest.param(
            "from opentelemetry.sdk.trace import TracerProvider",
            "{'tracer_provider': TracerProvider()}",
            "",
            {},
            0,
            id="explicit-provider",
        ),
        pytest.param("", "{}", "", {"OTEL_SDK_DISABLED": "true"}, 0, id="sdk-disabled-on-purpose"),
    ],
)
def test_warning_when_spans_would_go_nowhere(
    setup: str, kwargs: str, after: str, env: dict[str, str], warnings: int
) -> None:
    code = textwrap.dedent(NO_PROVIDER_APP).replace("SETUP", setup).replace("KWARGS", kwargs).replace("AFTER", after)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"
    assert proc.stderr.count(f"flowra_otel WARNING {NO_PROVIDER_WARNING}") == warnings, proc.stderr
    assert proc.stderr.count("spans go nowhere") == warnings, proc.stderr


async def test_uninstrument_leaves_the_apps_own_otel_hooks_tracing(
    instrumentor: FlowraInstrumentor,
    originals: dict[tuple[type, str], Any],
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    """instrument(), an app that adds its own OtelHooks, uninstrument(): the patches the app's
    hooks need stay (owned by them too) and its run is traced whole, with its tool result and
    conversation id; a registry made while instrumented keeps the instrumentor's handlers, which
    trace nothing any more. Paired negative: before owners were counted, uninstrument() removed
    the patches under the app, which then recorded nothing."""
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    auto = HookRegistry()  # carries the instrumentor's OtelHooks
    assert auto.has_handlers(BeforeLLMCallEvent)
    app = HookRegistry()  # made while instrumented too: the app's own takes over there
    app.add(OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True))
    instrumentor.uninstrument()
    assert patches.installed(), "uninstrument() removed the patches an app's OtelHooks needs"
    await _run_on(auto)
    assert span_exporter.get_finished_spans() == ()
    async with tool_registry(get_weather) as tools:
        runtime = tool_loop_runtime(_script(), tools, app)
        result = await run_tool_loop(runtime, "Weather in Oslo?", metadata={"conversation_id": "c-app"})
    assert result.status == ToolLoopStatus.COMPLETED
    spans = span_exporter.get_finished_spans()
    assert span_tree.shape(span_tree.build(spans)) == EXPECTED_SHAPE
    assert {s.attributes[semconv.GEN_AI_CONVERSATION_ID] for s in spans if s.attributes} == {"c-app"}
    (tool,) = [s for s in spans if s.name == "execute_tool get_weather"]
    assert tool.attributes is not None and semconv.GEN_AI_TOOL_CALL_RESULT in tool.attributes
