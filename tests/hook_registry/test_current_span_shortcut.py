"""Issue "Tracing cost": the plugin makes its ``chat`` and ``execute_tool`` spans current without
the API's call layers, and that shortcut behaves exactly as the API does, or is not taken.

``flowra_otel.current_span`` writes the standard runtime context's ``ContextVar`` directly and
builds the context with the key ``set_span_in_context`` uses. Where the process runs another
runtime context (``OTEL_PYTHON_CONTEXT``), the API must be used: a direct write would make the
spans current in a variable nobody reads, and HTTP spans made inside the provider call or the
tool would no longer nest under ``chat`` and ``execute_tool``.

Real ``AgentRuntime`` and ``ToolLoopAgent``, scripted provider, real OpenTelemetry SDK; the other
runtime context is a second instance of the SDK's own ``ContextVarsRuntimeContext``, installed the
way ``OTEL_PYTHON_CONTEXT`` installs one (as ``opentelemetry.context._RUNTIME_CONTEXT``).
"""

from collections.abc import Iterator

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import current_span
from tests.hook_registry.conftest import SpanLedger
from tests.hook_registry.test_nested_runs_and_exit_paths import (
    test_http_span_inside_the_provider_call_nests_under_chat_and_only_there as http_spans_nest_under_chat_and_tool,
)


@pytest.fixture
def other_runtime_context() -> Iterator[ContextVarsRuntimeContext]:
    """Another runtime context, as ``OTEL_PYTHON_CONTEXT`` would install it; put back after."""
    original = otel_context._RUNTIME_CONTEXT
    other = ContextVarsRuntimeContext()
    otel_context._RUNTIME_CONTEXT = other
    try:
        yield other
    finally:
        otel_context._RUNTIME_CONTEXT = original


def test_the_shortcut_builds_the_context_the_api_builds() -> None:
    assert current_span.uses_shortcut(), "the standard runtime context must take the shortcut"
    span = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    parent = Context({"some-key": "some-value"})
    built = current_span.context_with(span, parent)
    assert type(built) is Context
    assert built == trace.set_span_in_context(span, parent)
    assert trace.get_current_span(built) is span
    assert parent == {"some-key": "some-value"}, "the parent context must not change"

    token = current_span.attach(built)
    try:
        assert otel_context.get_current() is built
        assert trace.get_current_span() is span
        # Without a parent, the current context is the one extended.
        inner = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
        assert current_span.context_with(inner) == trace.set_span_in_context(inner)
    finally:
        current_span.detach(token)
    assert otel_context.get_current() is not built


async def test_another_runtime_context_goes_through_the_api(
    otel_hooks: OtelHooks,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
    other_runtime_context: ContextVarsRuntimeContext,
) -> None:
    assert not current_span.uses_shortcut(), "another runtime context must not take the shortcut"
    # The HTTP and tool spans of this scenario read the installed runtime context: were the chat
    # and tool contexts written to the standard variable, they would nest under invoke_agent.
    await http_spans_nest_under_chat_and_tool(otel_hooks, tracer_provider, span_exporter, ledger)
    token = current_span.attach(Context({"k": "v"}))
    try:
        assert other_runtime_context.get_current() == {"k": "v"}
    finally:
        current_span.detach(token)
    assert other_runtime_context.get_current() == {}
