"""The places where the plugin patches flowra, and why each is needed.

1. ``Engine.__execute_node`` (one task per node per step): a ``StepScope`` for the duration of the
   step, so every event knows its place in flowra's execution tree, and the book learns how the
   step ended (returned, spawned tool calls, interrupted, raised). Only steps that need it from
   their start get a wrapper (``SpanBook.step_needs``: a tool loop with an ``invoke_agent`` span,
   a tool call with an ``execute_tool`` span, an agent whose registry carries an ``OtelHooks``);
   any other step runs as flowra's own coroutine, and is *adopted* the moment an event in it
   turns out to be traced: the node is read off the step's task, the scope set in that task, and
   the step's end reported by a done callback (a nested run started there reads its parent's
   node the same way). So a run nothing traces pays no wrapper at all,
   and a registry (with its ``OtelHooks``) created at any point inside a run is traced from its
   first event.
2. ``HookRegistry.emit``: lets the run's ``SpanBook`` finish an event after *all* handlers,
   wherever registered, have run: values are recorded post-hook, never before a redaction hook.
   While any event's handlers run, ``IN_HOOKS`` is set: a model call or an agent run a hook makes
   there (a small model scrubbing a value it is given raw) records no content.
3. ``AgentRuntime.run`` / ``resume``: one ``SpanBook`` per call, holding the caller's current
   context (the parent of the root ``invoke_agent``) and ended, with everything in it, when the
   call returns or raises. This is what makes concurrent runs on one registry never mix.
4. ``call`` of every ``LLMProvider`` subclass: a provider call made by a custom agent (no tool-loop
   events) gets a ``chat`` span of its own. Only an ``async def`` (plain, ``staticmethod`` or
   ``classmethod``) is wrapped, in the same kind, so it binds and is called exactly as before;
   any other ``call`` (a callable object such as an ``AsyncMock``, a ``functools.partial``, a
   property or another descriptor, a plain ``def``) is left as it is: its direct calls get no
   ``chat`` span, and the provider behaves exactly as without the plugin.

Plain functions, not wrapper objects: flowra's own coroutine is returned untouched outside a run,
for steps nothing traces and for events the plugin does not trace, so an untraced event or step
costs a context-variable lookup and a test or two. Installing is idempotent; ``uninstall``
restores the original class attributes exactly. Providers defined after ``install`` are wrapped by
a cooperative ``LLMProvider.__init_subclass__`` that calls whatever the class hierarchy had first.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
import time
import types
import weakref
from contextvars import ContextVar
from typing import Any, Final

from opentelemetry import context as otel_context

from ...core import current_span
from ...core.errors import hook_boundary
from ...core.safety import guarded, internal_error
from ._flowra import (
    EXECUTE_NODE,
    AgentRuntime,
    Engine,
    HookRegistry,
    LLMProvider,
    handler_map,
    node_of_step_task,
    resumed_run_id,
    runtime_storage,
)
from .durable import NodeStateLinkStore
from .registry_view import PLUGIN_HANDLERS, may_be_traced
from .span_book import DELTA_EVENT_TYPES, INTERESTING_EVENTS, SpanBook
from .step_scope import IN_HOOKS, StepScope

logger = logging.getLogger("flowra_otel")

_CURRENT_BOOK: ContextVar[SpanBook | None] = ContextVar("flowra_otel.book", default=None)
_CURRENT_STEP: ContextVar[StepScope | None] = ContextVar("flowra_otel.step", default=None)

_MARK: Final = "__flowra_otel_original__"
"""Set on every replacement function: the attribute it replaced (for idempotence and uninstall)."""
_lock = threading.Lock()


def current_book() -> SpanBook | None:
    return _CURRENT_BOOK.get()


def current_step() -> StepScope | None:
    return _CURRENT_STEP.get()


# ---------------------------------------------------------------------------------- run / resume
# Every run gets a book once the patches are in: registries (and the OtelHooks on them) may be
# created lazily inside a run (flowra 0.0.3's ToolLoopAgent makes its own registry; agents may
# build isolated child registries in __init__), so "no OtelHooks registered yet" at run start
# does not mean the run is untraced. A book costs one small object until an event is claimed.
def _patched_run(original: Any, *, resume: bool) -> Any:
    @functools.wraps(original)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        book: SpanBook | None = None
        token = None
        try:
            outer = _CURRENT_BOOK.get()
            # A run started from inside another run's step (a tool that runs its own runtime)
            # nests under the span of that step's node, not under whatever happens to be current.
            parent = None
            if outer is not None and not outer.closed:
                step = _CURRENT_STEP.get()
                node = step.node if step is not None and step.book is outer else _node_of_current_step()
                parent = outer.context_for_node(node) if node is not None else None
            storage = runtime_storage(self)
            link_store: NodeStateLinkStore | None = None
            resumed: dict[str, Any] | None = None
            if storage is not None:  # a durable run: its trace link is kept per run (``durable``)
                link_store = NodeStateLinkStore(storage, await resumed_run_id(storage) if resume else None)
                resumed = await link_store.load() if resume else None
            book = SpanBook(
                parent if parent is not None else otel_context.get_current(),
                link_store=link_store,
                resumed=resumed,
                resuming=resume,
                content=not IN_HOOKS.get(),  # a run a hook started is given the hook's value raw
            )
            token = _CURRENT_BOOK.set(book)
        except Exception:
            internal_error("flowra_otel: could not start tracing this run; the agent is unaffected")
        try:
            result = await original(self, *args, **kwargs)
        except BaseException as exc:
            if book is not None:
                guarded(book.finish, exc)
            raise
        finally:
            if token is not None:
                _CURRENT_BOOK.reset(token)
        if book is not None:
            guarded(book.finish, None)
        return result

    return run


# ---------------------------------------------------------------------------------- engine step
def _patched_execute_node(original: Any) -> Any:
    @functools.wraps(original)
    def execute_node(node: Any) -> Any:
        """Not ``async``: a step nothing traces yet gets flowra's own coroutine, untouched.

        ``__execute_node(node)`` has this one parameter in every flowra from 0.0.3 to 0.0.8
        (an exact signature: no argument packing on a path taken for every step)."""
        book = _CURRENT_BOOK.get()
        if book is None or book.closed:
            return original(node)
        if book.resuming:  # the first steps of a resumed run: reopen what the run was doing
            guarded(book.reopen, node)
        agents = book.agents
        if id(node) in agents:  # a tool loop this run traces: the common case, inline
            return _traced_step(book, node, None, original)
        if not agents:  # no tool loop traced yet, so no tool call either: the scope cache, inline
            scope = getattr(node, "scope", None)
            known = book.owners.get(id(scope))
            if known is not None and known[0] is scope:
                return _traced_step(book, node, None, original) if known[1] else original(node)
        try:
            wanted, tool_context = book.step_needs(node)
        except Exception:
            internal_error("flowra_otel: could not look up the spans of a step")
            return original(node)
        if not wanted:
            return original(node)
        return _traced_step(book, node, tool_context, original)

    return execute_node


async def _traced_step(book: SpanBook, node: Any, tool_context: Any, original: Any) -> Any:
    """One step of a traced node, in the step's own task.

    The engine runs every step coroutine as a task of its own (``gather``/``ensure_future`` in
    every flowra from 0.0.3 to 0.0.8), and a task runs in a copy of the context it was created
    in, which is dropped when the task ends. So what this sets in the context (the step scope, a
    tool call's ``execute_tool`` span, the chat span of a provider call) is seen by exactly this
    step and the tasks it starts, and is never reset or detached: nothing outlives the task to
    see it, and each reset or detach would cost a context-variable write per step for nothing.
    """
    step = StepScope(book, node)
    _CURRENT_STEP.set(step)
    # A tool-call step runs with its execute_tool span current, so spans the tool itself makes
    # (an HTTP client, a database driver) nest under it.
    if tool_context is not None:
        current_span.attach(tool_context)
    try:
        result = await original(node)
    except BaseException as exc:
        book.step_ended(step, None, exc)  # never raises
        raise
    if id(node) in book.agents:  # a step that returned ends something only for a traced agent
        book.step_ended(step, result, None)
    return result


def _node_of_current_step() -> Any:
    """The node whose step runs in the current task (a step flowra runs unwrapped), or None."""
    try:
        return node_of_step_task(asyncio.current_task())
    except Exception:
        internal_error("flowra_otel: could not read the node of the current step")
        return None


def _adopt_step(book: SpanBook, node: Any = None) -> StepScope | None:
    """Something in an unwrapped step needs tracing: give the step its scope now.

    Set in the step's own task (so the rest of the step sees it, and nothing else does), and
    the step's end is reported by a done callback on that task, which runs before the engine
    reads the step's result (the engine awaits the task through ``gather``, whose own callback
    was registered first and only schedules the engine's wake-up).
    """
    task = asyncio.current_task()
    if node is None:
        node = node_of_step_task(task)
    if task is None or node is None:
        return None
    step = StepScope(book, node)
    _CURRENT_STEP.set(step)
    task.add_done_callback(functools.partial(_adopted_step_done, step))
    return step


def _adopted_step_done(step: StepScope, task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        step.book.step_ended(step, None, asyncio.CancelledError())
        return
    exc = task.exception()
    step.book.step_ended(step, task.result() if exc is None else None, exc)


# ---------------------------------------------------------------------------------- emit
async def _finished_when_awaited(
    book: SpanBook, step: StepScope, data: Any, owner: Any, registry: Any, start_ns: int
) -> Any:
    """What ``emit`` returns for an event no handler but the plugin's sees: acted on when the
    agent awaits it, as flowra's own emit would run its handlers (never if it is not awaited;
    in the task that awaits it), then the event itself."""
    book.finish_event(step, data, owner, registry, start_ns, None, None, None)
    if book.run.persist_pending:
        await book.run.persist()
    return data


def _in_hooks(original: Any, registry: Any, data: Any) -> Any:
    """flowra's own ``emit``, with ``IN_HOOKS`` set while its handlers run (whatever the event:
    a hook of any of them may hand a value to a model or an agent run, which then records no
    content). A plain registry with no handler for the event gets flowra's coroutine untouched."""
    if (type(registry) is HookRegistry and not handler_map(registry).get(type(data))) or IN_HOOKS.get():
        return original(registry, data)
    return _marked(original(registry, data))


async def _marked(emitting: Any) -> Any:
    token = IN_HOOKS.set(True)
    try:
        return await emitting
    finally:
        IN_HOOKS.reset(token)


hook_boundary(_marked)  # an exception that left flowra's own handler loop: raised in a hook (core.errors)


def _patched_emit(original: Any) -> Any:
    @functools.wraps(original)
    def emit(self: Any, data: Any) -> Any:
        """Not ``async``: events the plugin does not trace get flowra's own coroutine, untouched.

        ``emit(self, data)`` is flowra's exact signature in 0.0.3 - 0.0.8 (no argument packing on
        a path taken for every event)."""
        book = _CURRENT_BOOK.get()
        cls = type(data)
        if book is None or cls not in INTERESTING_EVENTS or book.closed:
            return _in_hooks(original, self, data)
        step = _CURRENT_STEP.get()
        if step is not None and step.book is book:
            if cls in DELTA_EVENT_TYPES:
                guarded(book.chunk, step.node)
                return _in_hooks(original, self, data)
            # The plugin's own handler alone on a plain registry (``hooks.add(OtelHooks())`` and no
            # hook of the user's on this event, the common case): no handler can change the event,
            # so the agent awaits a coroutine that acts on it and hands it back: no ``Event``
            # envelope, no handler loop, no ledger, as flowra's own emit behaves with a handler
            # that does nothing. Not a nested emit of the same event (propagate_to's).
            if type(self) is HookRegistry:
                frames = step.frames
                if not frames or type(frames[-1].data) is not cls:
                    handlers = handler_map(self).get(cls)
                    if (
                        handlers
                        and len(handlers) == 1
                        and getattr(handlers[0], "__func__", None) in PLUGIN_HANDLERS
                        and not handlers[0].__self__._retired
                    ):
                        return _finished_when_awaited(book, step, data, handlers[0].__self__, self, time.time_ns())
            # Otherwise the book runs the handler loop itself: an event no OtelHooks sees (directly
            # or through propagate_to) leaves no trace but a frame, popped when its handlers ran.
            return book.emit(step, original, self, data)
        # No scope: a step nothing traced when it started, or no engine step at all. A plain
        # registry with no handler for the event (the common case of a run nothing traces) is
        # read inline; anything else asks whether an OtelHooks can see the event.
        if cls in DELTA_EVENT_TYPES or (type(self) is HookRegistry and not handler_map(self).get(cls)):
            return _in_hooks(original, self, data)
        if not may_be_traced(self, cls):
            return _in_hooks(original, self, data)  # no OtelHooks can see it: nothing to finish after the hooks
        try:
            step = _adopt_step(book)
        except Exception:
            internal_error("flowra_otel: could not adopt a step")
            step = None
        if step is None:
            return _in_hooks(original, self, data)  # not inside an engine step
        return book.emit(step, original, self, data)

    return emit


# ---------------------------------------------------------------------------------- providers
_IN_PROVIDER_CALL: ContextVar[bool] = ContextVar("flowra_otel.in_provider_call", default=False)


def _patched_provider_call(original: Any, *, bound_first: bool) -> Any:
    """The traced replacement of an ``async def call``; ``bound_first``: its first argument is
    the instance (a method) or the class (a classmethod), not the request (a staticmethod)."""

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        """A provider call made by an agent that is not a tool loop gets its own ``chat`` span.

        Tool loops already trace their calls through Before/AfterLLMCallEvent, so a call made
        while the node's tool-loop chat span is open is left alone: never two ``chat`` spans for
        one call (nor for a provider that delegates to another). Not ``async`` (but marked a
        coroutine function, as the original is): a call the plugin does not trace gets the
        provider's own coroutine, untouched. Called with exactly the arguments it was given.
        """
        book = _CURRENT_BOOK.get()
        if book is None or book.closed or _IN_PROVIDER_CALL.get():
            return original(*args, **kwargs)
        # Steps of agents whose registry carries an OtelHooks are wrapped (``SpanBook.step_needs``),
        # so a step without a scope has no OtelHooks to own its calls.
        step = _CURRENT_STEP.get()
        if step is None or step.book is not book:
            return original(*args, **kwargs)
        agent = book.agents.get(id(step.node))
        if agent is not None and agent.chat is not None and not step.frames:
            return original(*args, **kwargs)  # the tool loop's own call: traced by its events
        chat = None
        try:
            first = 1 if bound_first else 0
            request = args[first] if len(args) > first else kwargs.get("request")
            chat = book.start_direct_chat(step, request)
        except Exception:
            internal_error("flowra_otel: could not start a chat span for a direct provider call")
        if chat is None:
            return original(*args, **kwargs)
        return _traced_call(book, chat, original, args, kwargs)

    inspect.markcoroutinefunction(call)
    return call


async def _traced_call(book: SpanBook, chat: Any, original: Any, args: Any, kwargs: Any) -> Any:
    flag = _IN_PROVIDER_CALL.set(True)
    ctx_token = current_span.attach(chat.provider_context())
    try:
        response = await original(*args, **kwargs)
    except BaseException as exc:
        guarded(book.end_direct_chat, chat, None, exc)
        raise
    finally:
        current_span.detach(ctx_token)
        _IN_PROVIDER_CALL.reset(flag)
    guarded(book.end_direct_chat, chat, response, None)
    return response


def _traced_attribute(original: Any) -> Any:
    """The replacement of a provider class's ``call`` attribute, of the same kind (so it binds,
    and is called, exactly as the original), or None for a kind the plugin leaves alone."""
    kind = type(original)
    func = original.__func__ if kind is staticmethod or kind is classmethod else original
    if type(func) is not types.FunctionType or not inspect.iscoroutinefunction(func):
        return None
    replacement = _patched_provider_call(func, bound_first=kind is not staticmethod)
    setattr(replacement, _MARK, original)
    return replacement if kind is types.FunctionType else kind(replacement)


_INIT_SUBCLASS: Final = "__init_subclass__"
_wrapped_providers: list[type] = []


def _wrap_provider_class(cls: type) -> None:
    original = cls.__dict__.get("call")
    if original is None or _is_ours(original):
        return
    replacement = _traced_attribute(original)
    if replacement is None:
        return  # a kind of ``call`` the plugin leaves alone
    _restore(cls, "call", replacement)  # the same kind of attribute, wrapped
    _wrapped_providers.append(cls)


def _init_subclass(cls: type[LLMProvider], /, **kwargs: Any) -> None:
    """Installed as ``LLMProvider.__init_subclass__``: providers defined later are wrapped too.

    Cooperative: the next ``__init_subclass__`` in the MRO after ``LLMProvider`` (a mixin's, or
    ``object``'s) runs first with the same keyword arguments, exactly as without the plugin.
    """
    super(LLMProvider, cls).__init_subclass__(**kwargs)
    guarded(_wrap_provider_class, cls)


def _all_subclasses(cls: type) -> list[type]:
    out: list[type] = []
    subclasses: list[type] = type.__subclasses__(cls)
    for subclass in subclasses:
        out.append(subclass)
        out.extend(_all_subclasses(subclass))
    return out


# ---------------------------------------------------------------------------------- install
_PATCHES: Final[tuple[tuple[type, str, Any], ...]] = (
    (Engine, EXECUTE_NODE, _patched_execute_node),
    (HookRegistry, "emit", _patched_emit),
    (AgentRuntime, "run", functools.partial(_patched_run, resume=False)),
    (AgentRuntime, "resume", functools.partial(_patched_run, resume=True)),
)


def _replace(cls: type, name: str, replacement: Any, original: Any) -> None:
    setattr(replacement, _MARK, original)
    setattr(cls, name, replacement)


def _restore(cls: type, name: str, original: Any) -> None:
    setattr(cls, name, original)


def _is_ours(value: Any) -> bool:
    return hasattr(getattr(value, "__func__", value), _MARK)


_owners: Final[weakref.WeakSet[Any]] = weakref.WeakSet()
"""Who needs the patches (the adapters: the app's ``OtelHooks`` and the zero-code instrumentor's).
Weak: an adapter the app dropped with its registries no longer holds them."""


def install(owner: object | None = None) -> None:
    """Patch flowra once per process (safe to call any number of times, from any thread), held
    for ``owner`` until ``uninstall(owner)``."""
    with _lock:
        if owner is not None:
            _owners.add(owner)
        for cls, name, make in _PATCHES:
            current = cls.__dict__.get(name)
            if current is None:
                logger.warning("flowra_otel: %s.%s not found; this flowra version is not supported", cls, name)
                continue
            if _is_ours(current):
                continue
            if isinstance(current, staticmethod):
                replacement = staticmethod(make(current.__func__))
                setattr(replacement.__func__, _MARK, current)
                setattr(cls, name, replacement)
            else:
                _replace(cls, name, make(current), current)
        if _INIT_SUBCLASS not in LLMProvider.__dict__:
            setattr(LLMProvider, _INIT_SUBCLASS, classmethod(_init_subclass))
        for sub in _all_subclasses(LLMProvider):
            _wrap_provider_class(sub)


def uninstall(owner: object | None = None) -> None:
    """``owner`` no longer needs the patches: once no live owner does, undo ``install`` exactly
    (put back the attributes that were there before), so ``FlowraInstrumentor().uninstrument()``
    never switches off an ``OtelHooks`` the app added itself. None: every owner lets go (tests)."""
    with _lock:
        if owner is None:
            _owners.clear()
        else:
            _owners.discard(owner)
        if _owners:
            return
        for cls, name, _ in _PATCHES:
            current = cls.__dict__.get(name)
            if current is not None and _is_ours(current):
                setattr(cls, name, getattr(getattr(current, "__func__", current), _MARK))
        while _wrapped_providers:
            cls = _wrapped_providers.pop()
            current = cls.__dict__.get("call")
            if current is not None and _is_ours(current):
                _restore(cls, "call", getattr(getattr(current, "__func__", current), _MARK))
        init_subclass = LLMProvider.__dict__.get(_INIT_SUBCLASS)
        if init_subclass is not None and getattr(init_subclass, "__func__", None) is _init_subclass:
            delattr(LLMProvider, _INIT_SUBCLASS)


def installed() -> bool:
    return all(_is_ours(cls.__dict__.get(name)) for cls, name, _ in _PATCHES)
