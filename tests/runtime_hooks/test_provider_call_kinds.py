"""Any kind of ``LLMProvider.call`` behaves exactly as without the plugin (flowra 0.0.86+).

On flowra 0.0.3 - 0.0.8 the plugin wraps ``call`` of every provider class (``tests/hook_registry/
test_provider_call_kinds.py``); on 0.0.86+ flowra's own ``LLMCallSpan`` reports every call, so the
adapter patches nothing of a provider: no class attribute of ``LLMProvider`` or of a subclass is
replaced, whatever kind its ``call`` is (``async def``, ``staticmethod``, ``classmethod``, a
class-level ``AsyncMock``, a callable object), and every kind's call is traced (a ``chat`` span)
with the result and the arguments it receives unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any
from unittest.mock import AsyncMock

import pytest
from flowra.llm import LLMProvider, LLMRequest, LLMResponse, StreamEvent
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended, traced
from tests.runtime_hooks.support import run_turn, text_response, turn_runtime

ANSWER = text_response("A summary.")
CHAT = "chat sonnet-4-5"

type Seen = list[tuple[Any, ...]]


async def _no_stream(self: Any, request: LLMRequest) -> AsyncIterator[StreamEvent]:
    events: tuple[StreamEvent, ...] = ()
    for event in events:  # an async generator that never yields: the agent never streams here
        yield event
    raise AssertionError("never streamed")


def _provider(name: str, call: Any) -> type[LLMProvider]:
    return type(name, (LLMProvider,), {"call": call, "stream": _no_stream, "__module__": __name__})


class _AsyncCallable:
    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def __call__(self, *args: Any) -> LLMResponse:
        self.seen.append(args)
        return ANSWER


def _kinds() -> dict[str, tuple[type[LLMProvider], Callable[[], Seen]]]:
    seen: dict[str, Seen] = {name: [] for name in ("method", "staticmethod", "classmethod", "callable_object")}

    async def method(self: Any, request: LLMRequest) -> LLMResponse:
        seen["method"].append((request,))
        return ANSWER

    async def static(request: LLMRequest) -> LLMResponse:
        seen["staticmethod"].append((request,))
        return ANSWER

    async def klass(cls: type, request: LLMRequest) -> LLMResponse:
        seen["classmethod"].append((request,))
        return ANSWER

    mock = AsyncMock(return_value=ANSWER)
    return {
        "method": (_provider("MethodCall", method), lambda: seen["method"]),
        "staticmethod": (_provider("StaticCall", staticmethod(static)), lambda: seen["staticmethod"]),
        "classmethod": (_provider("ClassCall", classmethod(klass)), lambda: seen["classmethod"]),
        "async_mock": (_provider("MockCall", mock), lambda: [tuple(c.args) for c in mock.await_args_list]),
        "callable_object": (
            _provider("CallableObjectCall", _AsyncCallable(seen["callable_object"])),
            lambda: seen["callable_object"],
        ),
    }


@pytest.mark.parametrize("name", ["method", "staticmethod", "classmethod", "async_mock", "callable_object"])
async def test_every_kind_of_call_is_traced_and_never_replaced(
    name: str,
    make_otel_hooks: Callable[..., OtelHooks],
    span_exporter: InMemorySpanExporter,
    ledger: SpanLedger,
) -> None:
    provider_cls, seen = _kinds()[name]
    base_attrs = dict(vars(LLMProvider))
    attrs = dict(vars(provider_cls))

    without_plugin = await run_turn(turn_runtime(provider_cls()), "Summarize.")
    calls_without = list(seen())
    with_plugin = await run_turn(traced(make_otel_hooks, turn_runtime(provider_cls())), "Summarize.")
    calls_with = seen()[len(calls_without) :]

    assert with_plugin.result_message == without_plugin.result_message
    assert len(calls_with) == len(calls_without) == 1
    assert [type(arg) for arg in calls_with[0]] == [LLMRequest]  # the request alone, no extra argument
    assert calls_with == calls_without
    # Nothing of the provider was replaced: the very same class attributes.
    assert dict(vars(provider_cls)) == attrs
    assert all(vars(provider_cls)[k] is v for k, v in attrs.items())
    assert dict(vars(LLMProvider)) == base_attrs
    assert [s.name for s in span_exporter.get_finished_spans()] == [CHAT, "invoke_agent assistant"]
    assert_all_ended(ledger, span_exporter)
