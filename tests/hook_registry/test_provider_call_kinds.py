"""Any kind of ``LLMProvider.call`` behaves exactly as without the plugin.

The plugin wraps ``call`` of every ``LLMProvider`` subclass (flowra 0.0.3 - 0.0.8), so a provider
call made by a custom agent (no tool-loop events) gets a ``chat`` span. Python lets a class
define ``call`` in many ways, and each binds differently: a plain ``async def`` (bound to the
instance), a ``staticmethod`` (no instance), a ``classmethod`` (the class), a callable object
such as an ``AsyncMock`` or a ``functools.partial`` (not bound at all), a property or another
descriptor (its own ``__get__``), an instance attribute that shadows the class's.

For every kind, a custom agent (``SummarizerAgent``, one direct ``provider.call(request)``) runs
through flowra's ``AgentRuntime`` without the plugin (patches uninstalled, no ``OtelHooks``) and
with it, for a provider class defined before the plugin was installed (wrapped by ``install``)
and after (wrapped by ``LLMProvider.__init_subclass__``): the result and the exact arguments the
implementation received are the same. An ``async def`` (plain, static or class method) is wrapped
in the same kind and traced (a ``chat`` span); every other kind is left exactly as it is (the
class attribute is the same object) and untraced. ``uninstall`` puts every original back.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, NamedTuple
from unittest.mock import AsyncMock

import pytest
from flowra.llm import LLMProvider, LLMRequest, LLMResponse, StreamEvent
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters.hook_registry import patches
from flowra_otel.core import semconv
from tests.hook_registry.conftest import hooks_with
from tests.hook_registry.flowra_support import (
    SummarizerAgent,
    SummarizeResult,
    SummarizeSpec,
    run_agent,
    specialist_runtime,
    text_response,
)

ANSWER = text_response("A summary.")
CHAT = "chat sonnet-4-5"

type Seen = list[tuple[Any, ...]]


class Kind(NamedTuple):
    """A provider class whose ``call`` is of one kind, and what its implementation received."""

    cls: type[LLMProvider]
    seen: Callable[[], Seen]


async def _answer(seen: Seen, *args: Any) -> LLMResponse:
    seen.append(args)
    return ANSWER


async def _no_stream(self: Any, request: LLMRequest) -> AsyncIterator[StreamEvent]:
    events: tuple[StreamEvent, ...] = ()
    for event in events:  # an async generator that never yields: the agent never streams here
        yield event
    raise AssertionError("never streamed")


def _provider(name: str, call: Any, **extra: Any) -> type[LLMProvider]:
    """A provider class defined now (``__init_subclass__`` runs now)."""
    namespace: dict[str, Any] = {"call": call, "stream": _no_stream, "__module__": __name__, **extra}
    return type(name, (LLMProvider,), namespace)


def _method() -> Kind:
    seen: Seen = []

    async def call(self: Any, request: LLMRequest) -> LLMResponse:
        return await _answer(seen, request)

    return Kind(_provider("MethodCall", call), lambda: seen)


def _static() -> Kind:
    seen: Seen = []

    async def call(request: LLMRequest) -> LLMResponse:
        return await _answer(seen, request)

    return Kind(_provider("StaticCall", staticmethod(call)), lambda: seen)


def _class() -> Kind:
    seen: Seen = []

    async def call(cls: type, request: LLMRequest) -> LLMResponse:
        assert cls.__name__ == "ClassCall"
        return await _answer(seen, request)

    return Kind(_provider("ClassCall", classmethod(call)), lambda: seen)


def _async_mock() -> Kind:
    mock = AsyncMock(return_value=ANSWER)
    return Kind(_provider("MockCall", mock), lambda: [tuple(c.args) for c in mock.await_args_list])


def _partial() -> Kind:
    seen: Seen = []
    return Kind(_provider("PartialCall", functools.partial(_answer, seen)), lambda: seen)


def _static_partial() -> Kind:
    seen: Seen = []
    return Kind(_provider("StaticPartialCall", staticmethod(functools.partial(_answer, seen))), lambda: seen)


class _AsyncCallable:
    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def __call__(self, *args: Any) -> LLMResponse:
        return await _answer(self.seen, *args)


def _callable_object() -> Kind:
    seen: Seen = []
    return Kind(_provider("CallableObjectCall", _AsyncCallable(seen)), lambda: seen)


class _Binder:
    """A descriptor of the user's own: binds the instance as a keyword."""

    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return functools.partial(_answer, self.seen, ("bound", type(obj).__name__ if obj is not None else None))


def _descriptor() -> Kind:
    seen: Seen = []
    return Kind(_provider("DescriptorCall", _Binder(seen)), lambda: seen)


def _property() -> Kind:
    seen: Seen = []
    return Kind(_provider("PropertyCall", property(lambda self: functools.partial(_answer, seen))), lambda: seen)


def _sync_def() -> Kind:
    seen: Seen = []

    def call(self: Any, request: LLMRequest) -> Any:  # returns the coroutine of another function
        return _answer(seen, request)

    return Kind(_provider("SyncDefCall", call), lambda: seen)


def _instance_attribute() -> Kind:
    """An ``async def call`` on the class, shadowed by an instance attribute set in ``__init__``."""
    seen: Seen = []

    async def call(self: Any, request: LLMRequest) -> LLMResponse:
        raise AssertionError("the instance attribute shadows the class's call")

    def init(self: Any) -> None:
        self.call = functools.partial(_answer, seen)

    return Kind(_provider("InstanceAttributeCall", call, __init__=init), lambda: seen)


KINDS: dict[str, tuple[Callable[[], Kind], bool]] = {
    # name: (builder, traced: the plugin wraps it and gives the direct call a chat span)
    "method": (_method, True),
    "staticmethod": (_static, True),
    "classmethod": (_class, True),
    "async_mock": (_async_mock, False),
    "partial": (_partial, False),
    "staticmethod_partial": (_static_partial, False),
    "callable_object": (_callable_object, False),
    "descriptor": (_descriptor, False),
    "property": (_property, False),
    "sync_def": (_sync_def, False),
    "instance_attribute": (_instance_attribute, True),
}


@pytest.fixture(autouse=True)
def _reinstalled() -> Iterator[None]:
    """Tests here uninstall the patches; the next ``OtelHooks`` built re-installs them."""
    yield
    patches.install()


@pytest.fixture(autouse=True)
def _partial_as_method_warning() -> Iterator[None]:
    """Python 3.13 warns when a ``functools.partial`` class attribute is read through an instance
    (it will bind in a later Python): the same warning with and without the plugin."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "functools.partial will be a method descriptor", FutureWarning)
        yield


async def _summarize(provider: LLMProvider, hooks: OtelHooks | None) -> object:
    runtime = specialist_runtime(provider, hooks_with(hooks) if hooks is not None else None)
    return await run_agent(runtime, SummarizerAgent, SummarizeSpec(text="A long text."))


def _expected_calls(name: str, request: LLMRequest) -> Seen:
    if name == "descriptor":
        return [(("bound", "DescriptorCall"), request)]
    return [(request,)]


@pytest.mark.parametrize("defined", ["before_install", "after_install"])
@pytest.mark.parametrize("name", list(KINDS))
async def test_every_kind_of_call_behaves_as_without_the_plugin(
    name: str, defined: str, make_otel_hooks: Callable[..., OtelHooks], span_exporter: InMemorySpanExporter
) -> None:
    build, traced = KINDS[name]
    if defined == "before_install":
        patches.uninstall()
        kind = build()
        hooks = make_otel_hooks()  # installs, and wraps the class defined before
    else:
        hooks = make_otel_hooks()
        kind = build()  # wrapped as it is defined
    original = kind.cls.__dict__["call"]
    assert patches.installed()

    with_plugin = await _summarize(kind.cls(), hooks)
    seen_with = list(kind.seen())

    patches.uninstall()
    restored = kind.cls.__dict__["call"]
    without_plugin = await _summarize(kind.cls(), None)
    seen_without = kind.seen()[len(seen_with) :]

    assert with_plugin == without_plugin == SummarizeResult(summary="A summary.")
    (request,) = [call[-1] for call in seen_with]
    assert isinstance(request, LLMRequest)
    assert seen_with == seen_without == _expected_calls(name, request)
    chats = [s for s in span_exporter.get_finished_spans() if s.name == CHAT]
    instance_traced = traced and name != "instance_attribute"  # the instance's own call wins
    assert len(chats) == (1 if instance_traced else 0)
    if instance_traced:
        assert (chats[0].attributes or {})[semconv.GEN_AI_REQUEST_MODEL] == "sonnet-4-5"
    if traced:  # wrapped in the same kind: binds as the original did
        assert type(original) is type(restored) and original is not restored
        assert patches._is_ours(original)
        assert inspect.iscoroutinefunction(kind.cls.__dict__["call"].__get__(None, kind.cls))
    else:  # left exactly as it was
        assert original is restored
    assert not patches._is_ours(restored)


def test_a_call_on_the_metaclass_is_never_touched(make_otel_hooks: Callable[..., OtelHooks]) -> None:
    """A metaclass's ``call`` is read only on the class itself (``Provider.call`` when the class
    has none): the plugin wraps attributes of ``LLMProvider`` subclasses, never of their metaclass."""

    async def meta_call(cls: type, request: LLMRequest) -> LLMResponse:
        return ANSWER

    meta = type("ProviderMeta", (type(LLMProvider),), {"call": meta_call})
    provider_cls = meta("MetaProvider", (LLMProvider,), {"call": _method().cls.__dict__["call"], "stream": _no_stream})
    make_otel_hooks()
    assert meta.__dict__["call"] is meta_call
    assert patches._is_ours(provider_cls.__dict__["call"])


async def test_without_same_kind_wrapping_static_calls_fail_and_mocks_get_an_extra_argument(
    monkeypatch: pytest.MonkeyPatch, make_otel_hooks: Callable[..., OtelHooks]
) -> None:
    """Paired negative: ``patches._traced_attribute`` made to wrap every callable ``call`` in a
    plain function, as if it were an instance method: a ``staticmethod`` provider raises
    ``TypeError`` on every call, and a class-level ``AsyncMock`` receives the provider instance
    as an extra first argument."""

    def as_plain_method(original: Any) -> Any:
        if not callable(original):
            return None
        replacement = patches._patched_provider_call(original, bound_first=True)
        setattr(replacement, patches._MARK, original)
        return replacement

    monkeypatch.setattr(patches, "_traced_attribute", as_plain_method)
    hooks = make_otel_hooks()
    static = _static()
    with pytest.raises(TypeError, match="positional argument"):
        await _summarize(static.cls(), hooks)
    mocked = _async_mock()
    provider = mocked.cls()
    await _summarize(provider, hooks)
    ((first, _request),) = mocked.seen()
    assert first is provider
