"""Zero-code on flowra 0.0.56+: ``FlowraInstrumentor`` in-process, and an unmodified app under
``opentelemetry-instrument``.

Instrumenting wraps ``AgentRuntime.__init__``: every runtime created from then on is traced by
one shared adapter. The app's own ``OtelHooks().install(runtime)`` replaces it on that runtime, so
the app's options always win (the issue: zero-code content capture switched on by
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` must not record content on a runtime
whose app said ``capture_content=False``).
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flowra.agent import AgentRuntime
from flowra.agent.flow.hooks import HooksImpl
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from flowra_otel import OtelHooks
from flowra_otel.adapters.runtime_hooks import _flowra, emit_patch
from flowra_otel.adapters.runtime_hooks.adapter import RuntimeHooksAdapter, tracings_of
from flowra_otel.adapters.runtime_hooks.instrumentor import NO_PROVIDER_WARNING
from flowra_otel.adapters.runtime_hooks.instrumentor import FlowraInstrumentor as LineInstrumentor
from flowra_otel.core import semconv
from flowra_otel.instrumentor import FlowraInstrumentor
from tests import span_tree
from tests.otlp_receiver import OtlpReceiver
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, wrapped_result
from tests.runtime_hooks.support import (
    APP_DIALECT,
    CARD,
    SSN,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    lookup_customer,
    run_chat,
    text_response,
    tool_calls_response,
)
from tests.zero_code import Upstream, app_environment

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CONTENT_KEYS = frozenset(
    {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
    }
)

EXPECTED_SHAPE: list[Any] = [
    (
        "invoke_agent assistant",
        [("chat sonnet-4-5", []), ("execute_tool get_weather", []), ("chat sonnet-4-5", [])],
    )
]
CUSTOMER_SHAPE: list[Any] = [
    (
        "invoke_agent assistant",
        [("chat sonnet-4-5", []), ("execute_tool lookup_customer", []), ("chat sonnet-4-5", [])],
    )
]


@pytest.fixture(autouse=True)
def emit_patch_as_it_was() -> Iterator[None]:
    """These tests take flowra's ``emit`` back (uninstrument, tracing off): put the process back
    as it was for the tests after them."""
    was = emit_patch.installed()
    yield
    if was:
        emit_patch.install()


@pytest.fixture
def originals() -> tuple[Any, Any]:
    """flowra's own ``AgentRuntime.__init__`` and ``HooksImpl.emit`` (earlier tests' OtelHooks
    patched emit: undo that first; the next OtelHooks built installs the patch again)."""
    emit_patch.uninstall()
    assert not emit_patch.installed()
    return AgentRuntime.__dict__["__init__"], HooksImpl.__dict__["emit"]


@pytest.fixture
def instrumentor() -> Iterator[FlowraInstrumentor]:
    inst = FlowraInstrumentor()
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()


def is_instrumented(instrumentor: FlowraInstrumentor) -> bool:
    """A call, not the property itself: mypy would otherwise narrow it across instrument() calls."""
    return bool(instrumentor.is_instrumented_by_opentelemetry)


def weather_runtime(runs: int = 1) -> AgentRuntime:
    script = [tool_calls_response(("c1", "get_weather", {"city": "Oslo"})), text_response("Sunny in Oslo, it says.")]
    return chat_runtime(ScriptedProvider(*script * runs), get_weather)


def customer_runtime() -> AgentRuntime:
    provider = ScriptedProvider(
        tool_calls_response(("c1", "lookup_customer", {"name": "Ann"})),
        text_response(f"Ann's card is {CARD}."),
    )
    return chat_runtime(provider, lookup_customer)


async def run_weather(runtime: AgentRuntime) -> None:
    result = await run_chat(runtime, "Weather in Oslo?")
    assert result.response == "Sunny in Oslo, it says."


def shape(exporter: InMemorySpanExporter) -> list[Any]:
    return span_tree.shape(span_tree.build(exporter.get_finished_spans()))


def content_on(spans: tuple[ReadableSpan, ...]) -> dict[str, set[str]]:
    """Span name -> the content attributes it carries."""
    return {s.name: keys for s in spans if (keys := set(s.attributes or {}) & CONTENT_KEYS)}


def dumped(spans: tuple[ReadableSpan, ...]) -> str:
    """Every attribute and event attribute of every span, as one string (for secret searches)."""
    return json.dumps(
        [[dict(s.attributes or {}), [dict(e.attributes or {}) for e in s.events]] for s in spans],
        default=str,
        ensure_ascii=False,
    )


# ------------------------------------------------------------------------------------ in-process
def test_entry_point_names_this_lines_instrumentor() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="opentelemetry_instrumentor") if e.name == "flowra"]
    assert entry.value == "flowra_otel.instrumentor:FlowraInstrumentor"
    assert entry.load() is FlowraInstrumentor is LineInstrumentor
    assert FlowraInstrumentor().instrumentation_dependencies() == ("flowra >= 0.0.47, <= 0.0.93",)
    assert FlowraInstrumentor()._check_dependency_conflicts() is None  # the installed flowra is in range


def test_is_a_singleton_without_instance_state(instrumentor: FlowraInstrumentor) -> None:
    assert FlowraInstrumentor() is instrumentor
    assert instrumentor.hooks is None


async def test_instrument_uninstrument_round_trip(
    instrumentor: FlowraInstrumentor,
    originals: tuple[Any, Any],
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    metric_reader: InMemoryMetricReader,
    ledger: SpanLedger,
) -> None:
    init, emit = originals
    before = weather_runtime(runs=2)  # created before instrumenting: left alone
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert is_instrumented(instrumentor)
    assert emit_patch.installed()
    assert AgentRuntime.__dict__["__init__"] is not init
    adapter = instrumentor.hooks
    assert isinstance(adapter, RuntimeHooksAdapter) and adapter._auto
    assert tracings_of(before) == []

    # A runtime created now is traced: the app installs nothing.
    during = weather_runtime(runs=2)
    assert [t.adapter for t in tracings_of(during)] == [adapter]
    await run_weather(during)
    assert shape(span_exporter) == EXPECTED_SHAPE
    assert_all_ended(ledger, span_exporter)
    assert metric_reader.get_metrics_data() is not None

    span_exporter.clear()
    await run_weather(before)  # still untraced
    assert span_exporter.get_finished_spans() == ()

    instrumentor.uninstrument()
    assert not is_instrumented(instrumentor)
    assert instrumentor.hooks is None
    assert AgentRuntime.__dict__["__init__"] is init, "AgentRuntime.__init__ is not flowra's own again"
    assert HooksImpl.__dict__["emit"] is emit, "HooksImpl.emit is not flowra's own again"
    assert not emit_patch.installed()
    # The runtime traced while instrumented is not any more; a new one never was.
    assert tracings_of(during) == []
    after = weather_runtime()
    assert tracings_of(after) == []
    for runtime in (during, after):
        await run_weather(runtime)
    assert span_exporter.get_finished_spans() == ()

    # Instrumenting again works (the singleton kept no stale state).
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    await run_weather(weather_runtime())
    assert shape(span_exporter) == EXPECTED_SHAPE


async def test_options_are_passed_to_the_adapter(
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
    await run_weather(weather_runtime())
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    assert "invoke_agent Weather Bot" in spans
    tool = spans["execute_tool get_weather"]
    assert (tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("Sunny in Oslo")


async def test_env_capture_on_but_the_apps_own_capture_off_records_no_content(
    instrumentor: FlowraInstrumentor,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issue: zero-code captures content (the variable says so); the app's own
    ``OtelHooks(capture_content=False)`` on its runtime must leave no content anywhere."""
    monkeypatch.setenv(CAPTURE_ENV, "true")
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    assert instrumentor.hooks is not None and instrumentor.hooks.options.capture_content is True

    runtime = customer_runtime()  # traced by the instrumentor from its creation
    app_hooks = OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False)
    app_hooks.install(runtime)
    app_hooks.install(runtime)  # twice: still one tracing
    assert [t.adapter for t in tracings_of(runtime)] == [app_hooks._adapter]

    result = await run_chat(runtime, f"Ann's SSN is {SSN}: her card?")
    assert result.response == f"Ann's card is {CARD}."
    spans = span_exporter.get_finished_spans()
    assert shape(span_exporter) == CUSTOMER_SHAPE  # traced once, not twice
    assert content_on(spans) == {}
    assert SSN not in dumped(spans) and CARD not in dumped(spans)
    assert_all_ended(ledger, span_exporter)


async def test_env_capture_on_records_content_on_a_runtime_the_app_leaves_to_zero_code(
    instrumentor: FlowraInstrumentor,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The paired positive of the test above: the same run, without the app's own OtelHooks,
    records the secrets, so "no content" there is the app's option at work, not a quiet run."""
    monkeypatch.setenv(CAPTURE_ENV, "true")
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    await run_chat(customer_runtime(), f"Ann's SSN is {SSN}: her card?")
    spans = span_exporter.get_finished_spans()
    assert shape(span_exporter) == CUSTOMER_SHAPE
    assert content_on(spans)["execute_tool lookup_customer"] == {
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
    }
    assert SSN in dumped(spans) and CARD in dumped(spans)


async def test_without_removing_the_instrumentors_hooks_its_content_would_leak(
    instrumentor: FlowraInstrumentor,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative check of the replacement: with ``_flowra.remove_global`` (which drops the
    instrumentor's subscriptions when the app installs its own) made a no-op, the instrumentor's
    tracing keeps running beside the app's, and its captured content reaches the spans."""
    monkeypatch.setenv(CAPTURE_ENV, "true")
    monkeypatch.setattr(_flowra, "remove_global", lambda hooks, handler_self: None)
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    runtime = customer_runtime()
    OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False).install(runtime)
    assert len(tracings_of(runtime)) == 2
    await run_chat(runtime, f"Ann's SSN is {SSN}: her card?")
    spans = span_exporter.get_finished_spans()
    assert SSN in dumped(spans)
    assert len([s for s in spans if s.name.startswith("invoke_agent")]) == 2


async def test_the_apps_own_capture_and_scrubber_win_over_zero_code_defaults(
    instrumentor: FlowraInstrumentor,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=False)
    runtime = weather_runtime()
    OtelHooks(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=True,
        redact=lambda text: text.replace("Oslo", "[CITY]"),
    ).install(runtime)
    await run_weather(runtime)
    assert shape(span_exporter) == EXPECTED_SHAPE
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    tool = spans["execute_tool get_weather"]
    assert (tool.attributes or {})[semconv.GEN_AI_TOOL_CALL_RESULT] == wrapped_result("Sunny in [CITY]")
    assert_all_ended(ledger, span_exporter)


def test_invalid_options_fail_at_instrument_time(instrumentor: FlowraInstrumentor, originals: tuple[Any, Any]) -> None:
    init, emit = originals
    with pytest.raises(TypeError, match="capture_content"):
        instrumentor.instrument(capture_content=3)  # a content mode's name or a bool
    assert not is_instrumented(instrumentor)
    assert AgentRuntime.__dict__["__init__"] is init
    assert HooksImpl.__dict__["emit"] is emit
    assert instrumentor.hooks is None
    assert tracings_of(weather_runtime()) == []


async def test_instrumenting_with_tracing_off_subscribes_and_patches_nothing(
    instrumentor: FlowraInstrumentor, originals: tuple[Any, Any]
) -> None:
    _, emit = originals
    instrumentor.instrument(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    runtime = weather_runtime()
    assert tracings_of(runtime) == []
    assert HooksImpl.__dict__["emit"] is emit
    await run_weather(runtime)


# ------------------------------------------------------------------------------------ opentelemetry-instrument
APP = '''
"""A plain flowra app: it knows nothing of OpenTelemetry or flowra_otel."""

import asyncio
import dataclasses

from flowra.agent import AgentRuntime
from flowra.lib.turn import TurnAgent, TurnConfig
from flowra.llm import AssistantMessage, LLMProvider, LLMResponse, StopReason, TextBlock, ToolUseBlock, Usage
from flowra.tools import ToolRegistry, tool
APP_DIALECT


class CannedLLM(LLMProvider):
    def __init__(self):
        self.calls = 0

    async def call(self, request):
        self.calls += 1
        if self.calls == 1:
            blocks = [ToolUseBlock(id="t1", name="get_time", input={"city": "Oslo"})]
            return LLMResponse(
                messages=[AssistantMessage(blocks=blocks)],
                stop_reason=StopReason.TOOL_USE,
                usage=Usage(input_tokens=12, output_tokens=3),
            )
        return LLMResponse(
            messages=[AssistantMessage(blocks=[TextBlock(text="It is noon in Oslo.")])],
            stop_reason=StopReason.END_TURN,
            usage=Usage(input_tokens=20, output_tokens=6),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class City:
    city: str


@tool("get_time")
async def get_time(params: City) -> str:
    """The local time in a city."""
    return f"12:00 in {params.city}"


async def main():
    provider = CannedLLM()
    config = TurnConfig(
        llm_config=llm_config(provider, "openai/gpt-4o"),
        system=[],
        history=[],
        tools=ToolRegistry([get_time]),
    )
    services = {TurnConfig: config, **provider_services(provider)}
    runtime = AgentRuntime(agents={"assistant": TurnAgent}, services=services)
    result = await runtime.run(agent=TurnAgent, spec=turn_spec("What time is it in Oslo?"))
    print("answer:", result.result_message.blocks[0].text)


asyncio.run(main())
'''.replace("APP_DIALECT", APP_DIALECT)


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


def test_the_app_knows_nothing_of_opentelemetry() -> None:
    code = APP.replace('"""A plain flowra app: it knows nothing of OpenTelemetry or flowra_otel."""', "")
    assert "flowra_otel" not in code and "opentelemetry" not in code


def test_unmodified_app_under_opentelemetry_instrument(tmp_path: Path) -> None:
    """Under opentelemetry-distro's distro and configurator, chosen by name (ours are installed
    too, found after them): the instrumentor traces with whatever set the process up, and says
    nothing, as the choice was explicit. (Our own distro: test_zero_code_follows_configure_telemetry.)"""
    with OtlpReceiver() as rx:
        proc = _launch(
            tmp_path,
            {
                "OTEL_PYTHON_DISTRO": "distro",
                "OTEL_PYTHON_CONFIGURATOR": "configurator",
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_METRICS_EXPORTER": "none",
                "OTEL_LOGS_EXPORTER": "none",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_ENDPOINT": rx.grpc_endpoint,
                "OTEL_SERVICE_NAME": "zero-code-app",
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            },
            upstream="first",
        )
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
    assert {s.trace_id for s in spans} == {agent.trace_id}
    assert {s.resource_attributes["service.name"] for s in spans} == {"zero-code-app"}
    assert {s.scope_name for s in spans} == {semconv.INSTRUMENTATION_NAME}
    tool = next(s for s in spans if s.name == "execute_tool get_time")
    assert tool.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "t1"
    chat = next(s for s in spans if s.name == "chat gpt-4o")
    assert chat.attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
    # Content capture is opt-in, also zero-code.
    assert not [k for s in spans for k in s.attributes if k in CONTENT_KEYS]


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
    from flowra.agent import AgentRuntime
    from flowra_otel.instrumentor import FlowraInstrumentor

    SETUP
    FlowraInstrumentor().instrument(**KWARGS)
    AFTER
    AgentRuntime(agents={})
    AgentRuntime(agents={})
    FlowraInstrumentor().uninstrument()
    FlowraInstrumentor().instrument(**KWARGS)
    AgentRuntime(agents={})
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
    originals: tuple[Any, Any],
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    """instrument(), an app that installs its own OtelHooks, uninstrument(): the patch the app's
    hooks need stays (owned by them too), the app's run keeps its tool result, ledger and
    conversation id, and the runtime the instrumentor traced records nothing. Paired negative:
    before owners were counted, uninstrument() put flowra's own emit back under the app."""
    _, emit = originals
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    auto = weather_runtime()
    app = weather_runtime()
    hooks = OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True)
    hooks.install(app)
    instrumentor.uninstrument()
    assert emit_patch.installed(), "uninstrument() removed the emit patch an app's OtelHooks needs"
    await run_weather(auto)
    assert span_exporter.get_finished_spans() == ()
    await run_chat(app, "Weather in Oslo?", conversation_id="c-app")
    assert shape(span_exporter) == EXPECTED_SHAPE
    spans = span_exporter.get_finished_spans()
    assert {s.attributes[semconv.GEN_AI_CONVERSATION_ID] for s in spans if s.attributes} == {"c-app"}
    (tool,) = [s for s in spans if s.name == "execute_tool get_weather"]
    assert tool.attributes is not None and semconv.GEN_AI_TOOL_CALL_RESULT in tool.attributes
    assert_all_ended(ledger, span_exporter)
    del hooks, app  # the last owner gone: uninstrumenting (again) puts flowra's own emit back
    gc.collect()
    instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    instrumentor.uninstrument()
    assert HooksImpl.__dict__["emit"] is emit
