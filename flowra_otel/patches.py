"""The three places where the plugin patches flowra (with wrapt), and why each is needed.

1. ``Engine._Engine__execute_node`` (one task per node per step): sets which ``ExecutionNode``
   is running for the duration of the step, so every event knows its place in flowra's
   execution tree, and reports how the step ended (completed, interrupted, raised).
2. ``HookRegistry.emit``: lets the run's ``SpanBook`` finish an event after *all* handlers,
   wherever registered, have run: values are recorded post-hook, never before a redaction hook.
3. ``AgentRuntime.run`` / ``resume``: one ``SpanBook`` per call, holding the caller's current
   context (the parent of the root ``invoke_agent``) and ended, with everything in it, when the
   call returns or raises. This is what makes concurrent runs on one registry never mix.

Installing is idempotent (wrapt would otherwise stack wrappers); ``uninstall`` restores the
original attributes exactly. Outside ``run``/``resume`` each patch costs one context-variable
lookup; inside a run, events no ``OtelHooks`` subscribes to go straight to flowra's own
coroutine. Once installed, every run in the process gets a (cheap) book: registries and the
``OtelHooks`` on them may be created lazily inside a run, so a run cannot be judged untraced at
its start (docs/performance.md measures that cost).
"""

from __future__ import annotations

import logging
import threading
from contextvars import ContextVar
from typing import Any

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace

from . import durable
from ._flowra import AgentRuntime, Engine, HookRegistry, LLMProvider
from .span_book import INTERESTING_EVENTS, SpanBook

logger = logging.getLogger("flowra_otel")

_CURRENT_NODE: ContextVar[Any] = ContextVar("flowra_otel.node", default=None)
_CURRENT_BOOK: ContextVar[SpanBook | None] = ContextVar("flowra_otel.book", default=None)

_EXECUTE_NODE = "_Engine__execute_node"
_lock = threading.Lock()
_originals: dict[tuple[type, str], Any] = {}


def current_book() -> SpanBook | None:
    return _CURRENT_BOOK.get()


def current_node() -> Any:
    return _CURRENT_NODE.get()


# Every run gets a book once the patches are in: registries (and the OtelHooks on them) may be
# created lazily inside a run (flowra 0.0.3's ToolLoopAgent makes its own registry; agents may
# build isolated child registries in __init__), so "no OtelHooks registered yet" at run start
# does not mean the run is untraced.
def _run_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return _traced_run(wrapped, instance, args, kwargs, resume=False)


def _resume_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return _traced_run(wrapped, instance, args, kwargs, resume=True)


async def _traced_run(wrapped: Any, instance: Any, args: Any, kwargs: Any, *, resume: bool) -> Any:
    book: SpanBook | None = None
    token = None
    try:
        outer = _CURRENT_BOOK.get()
        node = _CURRENT_NODE.get()
        # A run started from inside another run's step (a tool that runs its own runtime)
        # nests under the span of that step's node, not under whatever happens to be current.
        parent = outer.context_for_node(node) if outer is not None and node is not None else None
        storage = getattr(instance, "_AgentRuntime__storage", None)
        resumed = await durable.load(storage) if resume and storage is not None else None
        book = SpanBook(parent if parent is not None else otel_context.get_current(), storage=storage, resumed=resumed)
        token = _CURRENT_BOOK.set(book)
    except Exception:
        logger.exception("flowra_otel: could not start tracing this run; the agent is unaffected")
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _finish(book, exc)
        raise
    finally:
        if token is not None:
            _CURRENT_BOOK.reset(token)
    _finish(book, None)
    return result


def _finish(book: SpanBook | None, exc: BaseException | None) -> None:
    if book is None:
        return
    try:
        book.finish(exc)
    except Exception:
        logger.exception("flowra_otel: could not end this run's spans cleanly")


def _execute_node_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """Not ``async``: outside a traced run it hands back flowra's own coroutine, untouched."""
    book = _CURRENT_BOOK.get()
    if book is None:
        return wrapped(*args, **kwargs)
    return _traced_step(book, wrapped, args, kwargs)


async def _traced_step(book: SpanBook, wrapped: Any, args: Any, kwargs: Any) -> Any:
    # Runs inside the step's own task (the engine wraps this coroutine in a task), so the node
    # set here is seen by exactly this step's events.
    node = args[0] if args else kwargs.get("node")
    token = _CURRENT_NODE.set(node)
    # A tool-call step runs with its execute_tool span current, so spans the tool itself makes
    # (an HTTP client, a database driver) nest under it. Attached and detached in this task.
    tool_context = None
    try:
        tool_context = book.tool_context(node)
    except Exception:
        logger.exception("flowra_otel: could not look up the tool span of a step")
    ctx_token = otel_context.attach(tool_context) if tool_context is not None else None
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _step_ended(book, node, None, exc)
        raise
    finally:
        if ctx_token is not None:
            otel_context.detach(ctx_token)
        _CURRENT_NODE.reset(token)
    _step_ended(book, node, result, None)
    return result


def _step_ended(book: SpanBook, node: Any, result: Any, exc: BaseException | None) -> None:
    try:
        book.step_ended(node, result, exc)
    except Exception:
        logger.exception("flowra_otel: internal error at the end of a step; the agent is unaffected")


def _emit_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """Not ``async``: events the plugin does not trace get flowra's own coroutine, untouched."""
    book = _CURRENT_BOOK.get()
    if book is None or book.closed:
        return wrapped(*args, **kwargs)
    data = args[0] if args else kwargs.get("data")
    if type(data) not in INTERESTING_EVENTS:
        return wrapped(*args, **kwargs)
    return book.emit(wrapped, instance, data, _CURRENT_NODE.get(), args, kwargs)


_PATCHES: tuple[tuple[type, str, Any], ...] = (
    (Engine, _EXECUTE_NODE, _execute_node_wrapper),
    (HookRegistry, "emit", _emit_wrapper),
    (AgentRuntime, "run", _run_wrapper),
    (AgentRuntime, "resume", _resume_wrapper),
)

_IN_PROVIDER_CALL: ContextVar[bool] = ContextVar("flowra_otel.in_provider_call", default=False)


async def _provider_call_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``LLMProvider.call`` made by an agent that is not a tool loop gets its own ``chat`` span.

    Tool loops already trace their calls through Before/AfterLLMCallEvent, so a call made while
    the node's tool-loop chat span is open is left alone: never two ``chat`` spans for one call.
    """
    book = _CURRENT_BOOK.get()
    node = _CURRENT_NODE.get()
    if book is None or node is None or book.closed or _IN_PROVIDER_CALL.get():
        return await wrapped(*args, **kwargs)
    request = args[0] if args else kwargs.get("request")
    chat = None
    try:
        chat = book.start_direct_chat(node, request)
    except Exception:
        logger.exception("flowra_otel: could not start a chat span for a direct provider call")
    if chat is None:
        return await wrapped(*args, **kwargs)
    flag = _IN_PROVIDER_CALL.set(True)
    ctx_token = otel_context.attach(trace.set_span_in_context(chat.span))
    try:
        response = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _end_direct(book, chat, None, exc)
        raise
    finally:
        otel_context.detach(ctx_token)
        _IN_PROVIDER_CALL.reset(flag)
    _end_direct(book, chat, response, None)
    return response


def _end_direct(book: SpanBook, chat: Any, response: Any, exc: BaseException | None) -> None:
    try:
        book.end_direct_chat(chat, response, exc)
    except Exception:
        logger.exception("flowra_otel: could not end a direct provider call's chat span")


_wrapped_providers: list[tuple[type, Any]] = []
_CALL = "call"
_INIT_SUBCLASS = "__init_subclass__"


def _wrap_provider_class(cls: type) -> None:
    original = cls.__dict__.get("call")
    if original is None or _is_ours(cls, "call", _provider_call_wrapper):
        return
    _wrapped_providers.append((cls, original))
    wrapt.wrap_function_wrapper(cls, "call", _provider_call_wrapper)


def _init_subclass(cls: type, /, **kwargs: Any) -> None:
    """Installed as ``LLMProvider.__init_subclass__``: providers defined later are wrapped too."""
    try:
        _wrap_provider_class(cls)
    except Exception:
        logger.exception("flowra_otel: could not wrap provider %s", cls)


def _all_subclasses(cls: type) -> list[type]:
    out: list[type] = []
    subclasses: list[type] = type.__subclasses__(cls)
    for subclass in subclasses:
        out.append(subclass)
        out.extend(_all_subclasses(subclass))
    return out


def _install_providers() -> None:
    if _INIT_SUBCLASS not in LLMProvider.__dict__:
        setattr(LLMProvider, _INIT_SUBCLASS, classmethod(_init_subclass))
    for sub in _all_subclasses(LLMProvider):
        _wrap_provider_class(sub)


def _uninstall_providers() -> None:
    while _wrapped_providers:
        cls, original = _wrapped_providers.pop()
        setattr(cls, _CALL, original)
    if _INIT_SUBCLASS in LLMProvider.__dict__:
        delattr(LLMProvider, _INIT_SUBCLASS)


def _is_ours(cls: type, name: str, wrapper: Any) -> bool:
    current = cls.__dict__.get(name)
    return isinstance(current, wrapt.FunctionWrapper) and getattr(current, "_self_wrapper", None) is wrapper


def install() -> None:
    """Patch flowra once per process (safe to call any number of times, from any thread)."""
    with _lock:
        for cls, name, wrapper in _PATCHES:
            if _is_ours(cls, name, wrapper):
                continue
            if name not in cls.__dict__:
                logger.warning("flowra_otel: %s.%s not found; this flowra version is not supported", cls, name)
                continue
            _originals[(cls, name)] = cls.__dict__[name]
            wrapt.wrap_function_wrapper(cls, name, wrapper)
        _install_providers()


def uninstall() -> None:
    """Undo ``install`` exactly: put back the attributes that were there before."""
    with _lock:
        for cls, name, wrapper in _PATCHES:
            original = _originals.pop((cls, name), None)
            if original is not None and _is_ours(cls, name, wrapper):
                setattr(cls, name, original)
        _uninstall_providers()


def installed() -> bool:
    return all(_is_ours(cls, name, wrapper) for cls, name, wrapper in _PATCHES)
