"""Fault tolerance: nothing that goes wrong around the plugin may change what the agent does.

Real components only: flowra's own agents through ``AgentRuntime``, the real SDK, the real OTLP
exporters (gRPC and HTTP) talking to a closed port or to the in-process ``OtlpReceiver`` in a
fault mode. Every agent-side scenario runs twice, with and without the plugin, and the two
outcomes (result, or exception type and message) must be identical; a counting span processor
checks that every span the plugin started was also ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal

import pytest
from flowra.agent import Event, HookRegistry
from flowra.lib.tool_loop import AfterToolCallEvent, BeforeLLMCallEvent, ToolLoopResult
from flowra.tools import LocalTool, ToolDefinition, ToolExecutionContext, ToolResult
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from tests.hook_registry.flowra_support import (
    DEFAULT_MODEL,
    ScriptedProvider,
    ScriptStep,
    add,
    fail_tool,
    get_weather,
    run_tool_loop,
    text_response,
    tool_calls_response,
    tool_loop_runtime,
    tool_registry,
    usage,
)
from tests.otlp_receiver import OtlpReceiver

MakeHooks = Callable[..., OtelHooks]
Protocol = Literal["grpc", "http"]
Fault = Literal["closed_port", "hang", "error"]

RUNS = 30
SPANS_PER_RUN = 5  # invoke_agent, chat, 2 x execute_tool, chat
MAX_QUEUE = 64
TIME_SLACK_S = 1.0
"""What the plugin may add to RUNS agent runs: generous, because export is on the processor's thread."""


# ------------------------------------------------------------------------------------ helpers
class CountingProcessor(SpanProcessor):
    """Counts spans started and ended, and remembers which are still open."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = 0
        self.ended = 0
        self._open: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._lock:
            self.started += 1
            self._open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.ended += 1
            if span.context is not None:
                self._open.pop(span.context.span_id, None)

    @property
    def still_open(self) -> list[str]:
        with self._lock:
            return sorted(self._open.values())

    def assert_all_ended(self) -> None:
        assert self.still_open == [], f"spans never ended: {self.still_open}"
        assert self.started == self.ended


@pytest.fixture
def counter(tracer_provider: TracerProvider) -> CountingProcessor:
    processor = CountingProcessor()
    tracer_provider.add_span_processor(processor)
    return processor


def registry_with(*providers: Any) -> HookRegistry:
    registry = HookRegistry()
    for provider in providers:
        registry.add(provider)
    return registry


def workload_script() -> list[ScriptStep]:
    return [
        tool_calls_response(
            [("c1", "get_weather", {"city": "Paris"}), ("c2", "add", {"a": 2, "b": 3})], usage=usage(10, 5)
        ),
        text_response("Sunny in Paris; 2 + 3 = 5.", usage=usage(20, 7)),
    ]


async def run_workload(
    hooks: HookRegistry, runs: int, after_each: Callable[[], None] = lambda: None
) -> tuple[list[ToolLoopResult], float]:
    """``runs`` sequential agent runs; their results and the wall time of the runs alone."""
    results: list[ToolLoopResult] = []
    async with tool_registry(get_weather, add) as tools:
        elapsed = 0.0
        for _ in range(runs):
            runtime = tool_loop_runtime(ScriptedProvider(workload_script()), tools, hooks)
            start = time.perf_counter()
            results.append(await run_tool_loop(runtime, "Weather in Paris, and 2 + 3?"))
            elapsed += time.perf_counter() - start
            after_each()
    return results, elapsed


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextlib.contextmanager
def faulty_exporter(protocol: Protocol, fault: Fault) -> Iterator[SpanExporter]:
    """A real OTLP span exporter (1 s timeout) whose collector is down, hangs, or refuses."""
    with contextlib.ExitStack() as stack:
        if fault == "closed_port":
            base = f"http://127.0.0.1:{closed_port()}"
            grpc_endpoint, http_endpoint = base, base + "/v1/traces"
        else:
            rx = stack.enter_context(OtlpReceiver(mode=fault, hang_seconds=3.0))
            grpc_endpoint, http_endpoint = rx.grpc_endpoint, rx.http_traces_endpoint
        if protocol == "grpc":
            yield GrpcSpanExporter(endpoint=grpc_endpoint, insecure=True, timeout=1)
        else:
            yield HttpSpanExporter(endpoint=http_endpoint, timeout=1)


def metric_sum(reader: InMemoryMetricReader, name: str, **attrs: str) -> int:
    """Sum of the current data points of metric ``name`` whose attributes include ``attrs``."""
    data = reader.get_metrics_data()
    total = 0
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    point_attrs = dict(point.attributes or {})
                    if all(point_attrs.get(k) == v for k, v in attrs.items()):
                        total += int(getattr(point, "value", 0))
    return total


# ------------------------------------------------------------------------------------ export faults
@pytest.mark.parametrize("fault", ["closed_port", "hang", "error"])
@pytest.mark.parametrize("protocol", ["grpc", "http"])
async def test_broken_collector_never_reaches_the_agent(
    protocol: Protocol, fault: Fault, monkeypatch: pytest.MonkeyPatch, meter_provider: MeterProvider
) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    # The SDK's own processor metrics (queue size, processed/dropped spans): public, no private access.
    monkeypatch.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "true")
    sdk_reader = InMemoryMetricReader()
    sdk_meters = MeterProvider(metric_readers=[sdk_reader])

    bare_results, bare_time = await run_workload(HookRegistry(), RUNS)

    counter = CountingProcessor()
    queue_sizes: list[int] = []
    with faulty_exporter(protocol, fault) as exporter:
        processor = BatchSpanProcessor(
            exporter,
            max_queue_size=MAX_QUEUE,
            max_export_batch_size=MAX_QUEUE,
            schedule_delay_millis=50,
            meter_provider=sdk_meters,
        )
        provider = TracerProvider()
        provider.add_span_processor(counter)
        provider.add_span_processor(processor)
        otel = OtelHooks(tracer_provider=provider, meter_provider=meter_provider)

        def sample_queue() -> None:
            queue_sizes.append(metric_sum(sdk_reader, "otel.sdk.processor.span.queue.size"))

        traced_results, traced_time = await run_workload(registry_with(otel), RUNS, sample_queue)

        start = time.monotonic()
        processor.force_flush(timeout_millis=500)
        flush_s = time.monotonic() - start
        queued_after_flush = metric_sum(sdk_reader, "otel.sdk.processor.span.queue.size")
        start = time.monotonic()
        provider.shutdown()
        shutdown_s = time.monotonic() - start
    sdk_meters.shutdown()

    assert traced_results == bare_results
    assert traced_time < bare_time + TIME_SLACK_S, (traced_time, bare_time)
    counter.assert_all_ended()
    assert counter.started == RUNS * SPANS_PER_RUN
    # Bounded: the queue never grew past its size; every span was either handed to the exporter
    # or dropped, none is left piling up in memory. (``>=``: the SDK may count a drop twice when
    # its worker empties the full queue at the same moment, a benign race of its own.)
    assert max(queue_sizes) <= MAX_QUEUE
    assert queued_after_flush == 0
    processed = metric_sum(sdk_reader, "otel.sdk.processor.span.processed")
    dropped = metric_sum(sdk_reader, "otel.sdk.processor.span.processed", **{"error.type": "queue_full"})
    assert processed >= RUNS * SPANS_PER_RUN
    if fault == "hang":  # the worker is stuck in a 1 s export while 150 spans arrive: some must go
        assert dropped > 0
    # One export in flight (1 s timeout, plus at most one retry) and one of the whole queue.
    assert flush_s < 3.5, flush_s
    assert shutdown_s < 2.5, shutdown_s


# ------------------------------------------------------------------------------------ paired runs
type Outcome = tuple[str, Any]
type Scenario = Callable[[list[Any]], Awaitable[Outcome]]
"""Runs one agent scenario with the given hook providers added to its registry (user hooks first)."""


class HookBoomError(RuntimeError):
    pass


class ProviderDownError(RuntimeError):
    pass


class ToolAbortError(BaseException):
    """Not an ``Exception``: flowra's tool registry does not turn it into an error result."""


async def outcome_of(run: Awaitable[ToolLoopResult]) -> Outcome:
    try:
        return ("result", await run)
    except BaseException as exc:  # the comparison is the point: CancelledError included
        return ("raised", (type(exc), str(exc)))


def named_tool(name: str, handler: Callable[[ToolExecutionContext], Awaitable[ToolResult]]) -> LocalTool:
    definition = ToolDefinition(name=name, description=f"The {name} tool.", input_schema={"type": "object"})
    return LocalTool(definition=definition, handler=handler)


class UserHooks:
    """The user's own hooks, registered before the plugin, one of them raising."""

    def __init__(self, event_type: type[Any], message: str) -> None:
        self.event_type = event_type
        self.message = message

    def register_hooks(self, registry: HookRegistry) -> None:
        def boom(event: Event[Any]) -> None:
            raise HookBoomError(self.message)

        registry.on(self.event_type, boom)


async def weather_run(providers: list[Any], steps: list[ScriptStep] | None = None) -> Outcome:
    script = steps or [
        tool_calls_response([("w", "get_weather", {"city": "Oslo"})], usage=usage(3, 2)),
        text_response("Cold.", usage=usage(5, 1)),
    ]
    async with tool_registry(get_weather, fail_tool) as tools:
        runtime = tool_loop_runtime(ScriptedProvider(script), tools, registry_with(*providers))
        return await outcome_of(run_tool_loop(runtime, "Weather in Oslo?"))


async def before_llm_hook_raises(providers: list[Any]) -> Outcome:
    return await weather_run([UserHooks(BeforeLLMCallEvent, "before-llm hook failed"), *providers])


async def after_tool_hook_raises(providers: list[Any]) -> Outcome:
    return await weather_run([UserHooks(AfterToolCallEvent, "after-tool hook failed"), *providers])


async def tool_raises(providers: list[Any]) -> Outcome:
    script: list[ScriptStep] = [
        tool_calls_response([("f", "fail_tool", {"reason": "disk full"})]),
        text_response("The tool failed."),
    ]
    return await weather_run(providers, script)


async def tool_raises_base_exception(providers: list[Any]) -> Outcome:
    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        raise ToolAbortError("abort the whole run")

    provider = ScriptedProvider([tool_calls_response([("x", "abort", {})]), text_response("never")])
    async with tool_registry(named_tool("abort", handler)) as tools:
        runtime = tool_loop_runtime(provider, tools, registry_with(*providers))
        return await outcome_of(run_tool_loop(runtime, "go"))


async def provider_raises(providers: list[Any]) -> Outcome:
    script: list[ScriptStep] = [
        tool_calls_response([("w", "get_weather", {"city": "Oslo"})]),
        ProviderDownError("503 from the model API"),
    ]
    return await weather_run(providers, script)


async def run_task_cancelled(providers: list[Any]) -> Outcome:
    started = asyncio.Event()

    async def handler(ctx: ToolExecutionContext) -> ToolResult:
        started.set()
        await asyncio.sleep(3600)
        return ToolResult(content="unreachable")

    provider = ScriptedProvider([tool_calls_response([("b", "blocker", {})])])
    async with tool_registry(named_tool("blocker", handler)) as tools:
        runtime = tool_loop_runtime(provider, tools, registry_with(*providers))
        task = asyncio.create_task(run_tool_loop(runtime, "go"))
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
        return await outcome_of(task)


SCENARIOS: dict[str, Scenario] = {
    "before_llm_hook_raises": before_llm_hook_raises,
    "after_tool_hook_raises": after_tool_hook_raises,
    "tool_raises": tool_raises,
    "tool_raises_base_exception": tool_raises_base_exception,
    "provider_raises": provider_raises,
    "run_task_cancelled": run_task_cancelled,
}
EXPECTED_KIND = {
    "before_llm_hook_raises": ("raised", HookBoomError),
    "after_tool_hook_raises": ("raised", HookBoomError),
    "tool_raises": ("result", ToolLoopResult),
    "tool_raises_base_exception": ("raised", ToolAbortError),
    "provider_raises": ("raised", ProviderDownError),
    "run_task_cancelled": ("raised", asyncio.CancelledError),
}


@pytest.mark.parametrize("capture_content", [False, True])
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_failures_around_the_agent_behave_as_without_the_plugin(
    name: str,
    capture_content: bool,
    make_otel_hooks: MakeHooks,
    counter: CountingProcessor,
    span_exporter: InMemorySpanExporter,
) -> None:
    scenario = SCENARIOS[name]
    bare = await scenario([])
    traced = await scenario([make_otel_hooks(capture_content=capture_content)])

    assert traced == bare
    kind, cls = EXPECTED_KIND[name]
    assert bare[0] == kind
    assert isinstance(bare[1], cls) if kind == "result" else bare[1][0] is cls
    counter.assert_all_ended()
    assert counter.started > 0
    assert len(span_exporter.get_finished_spans()) == counter.started
    if kind == "raised":
        (root,) = [s for s in span_exporter.get_finished_spans() if s.parent is None]
        assert root.attributes is not None
        assert str(root.attributes[semconv.ERROR_TYPE]).endswith(cls.__qualname__)


# ------------------------------------------------------------------------------------ plugin faults
def flowra_otel_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("flowra_otel") and r.levelno >= logging.ERROR]


def expect_logged_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The errors this test provoked on purpose: tell the autouse fixture how many to expect."""
    errors = flowra_otel_errors(caplog)
    caplog.flowra_otel_expected_errors = len(errors)  # type: ignore[attr-defined]
    return errors


class RedactorBugError(RuntimeError):
    pass


def raising_redactor(text: str) -> str:
    raise RedactorBugError("the user's redactor is broken")


def raising_agent_name(path: str) -> str:
    raise RuntimeError("agent-name lookup is broken")


async def test_a_raising_redact_function_is_swallowed_and_leaks_nothing(
    make_otel_hooks: MakeHooks,
    counter: CountingProcessor,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bare = await weather_run([])
    otel = make_otel_hooks(capture_content=True, redact=raising_redactor)
    traced = await weather_run([otel])

    assert traced == bare
    errors = expect_logged_errors(caplog)
    assert errors, "a failing redactor must be reported on the flowra_otel logger"
    # By the exception's type and place only: its message and traceback may echo the value.
    assert all(r.exc_info is None and f"{RedactorBugError.__qualname__} at " in r.getMessage() for r in errors)
    counter.assert_all_ended()
    spans = span_exporter.get_finished_spans()
    assert len(spans) == counter.started == 4
    # The redactor could not vouch for the content, so none of it reached a span.
    for span in spans:
        for value in (span.attributes or {}).values():
            assert "Oslo" not in str(value)
            assert "Cold." not in str(value)


async def test_a_raising_redact_function_on_a_failing_run(
    make_otel_hooks: MakeHooks,
    counter: CountingProcessor,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Error paths render the exception text through the same choke point."""
    bare = await provider_raises([])
    traced = await provider_raises([make_otel_hooks(capture_content=True, redact=raising_redactor)])

    assert traced == bare
    assert expect_logged_errors(caplog)
    counter.assert_all_ended()
    assert len(span_exporter.get_finished_spans()) == counter.started > 0


async def test_a_raising_agent_name_callable_is_swallowed(
    make_otel_hooks: MakeHooks,
    counter: CountingProcessor,
    span_exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bare = await weather_run([])
    traced = await weather_run([make_otel_hooks(agent_name=raising_agent_name)])

    assert traced == bare
    errors = expect_logged_errors(caplog)
    assert errors, "a failing agent_name callable must be reported on the flowra_otel logger"
    counter.assert_all_ended()
    spans = span_exporter.get_finished_spans()
    assert len(spans) == counter.started
    # The agent keeps its default name (its flowra path) rather than losing its spans.
    agents = [s for s in spans if (s.attributes or {}).get(semconv.GEN_AI_OPERATION_NAME) == "invoke_agent"]
    assert [(s.attributes or {}).get(semconv.GEN_AI_AGENT_NAME) for s in agents] == ["assistant"]


@pytest.mark.parametrize("returned", [42, None, b"openai", "", ["openai"]])
async def test_a_provider_name_callable_returning_a_non_str_keeps_the_default(
    returned: object,
    make_otel_hooks: MakeHooks,
    counter: CountingProcessor,
    span_exporter: InMemorySpanExporter,
) -> None:
    bare = await weather_run([])
    traced = await weather_run([make_otel_hooks(provider_name=lambda model: returned)])

    assert traced == bare
    counter.assert_all_ended()
    chats = [s for s in span_exporter.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == 2
    for chat in chats:
        attrs = chat.attributes or {}
        assert attrs[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
        assert attrs[semconv.FLOWRA_LLM_MODEL] == DEFAULT_MODEL
