"""What the plugin reads off a ``HookRegistry``: whose handlers are on it, and where it forwards.

Why apart from the router: these questions decide, per event, whether the plugin has any work to
do at all (an event no ``OtelHooks`` can see goes straight to flowra's own emit), which handlers
are the plugin's own (claims, never called), and which ``OtelHooks`` owns a custom agent's direct
provider calls (and so whether its steps need a scope from their start).
"""

from __future__ import annotations

from typing import Any

from ._flowra import DELTA_EVENTS, HookRegistry, events, forward_target, handler_map, registry_handlers, services_of
from .owner import Owner

PLUGIN_HANDLERS: set[Any] = set()
"""The functions ``OtelHooks`` registers (filled in by ``hooks.py``): how a handler is told apart."""


def is_plugin_handler(handler: Any) -> bool:
    return getattr(handler, "__func__", None) in PLUGIN_HANDLERS


def may_be_traced(registry: Any, event_type: type[Any], depth: int = 0) -> bool:
    """Whether an ``OtelHooks`` can see this event on ``registry``: one of its handlers, or a
    ``propagate_to`` forwarder to a registry where one can. Events no ``OtelHooks`` can see go
    straight to flowra's own emit."""
    if type(registry) is HookRegistry:
        handlers = handler_map(registry).get(event_type)
    else:
        handlers = registry_handlers(registry, event_type)
    for handler in handlers or ():
        if is_plugin_handler(handler):
            return True
        target = forward_target(handler)
        if target is not None and depth < 8 and may_be_traced(target, event_type, depth + 1):
            return True
    return False


def takes_over(current: Owner | None, candidate: Owner) -> bool:
    """Whether ``candidate`` traces an event rather than ``current`` (the ``OtelHooks`` that saw
    it first, or None): the first one to see it does, except that an app's own ``OtelHooks`` takes
    over from the zero-code instrumentor's. A registry made while instrumented carries the
    instrumentor's, and a child registry forwards to the app's; the app's options always apply."""
    if candidate._retired:  # the zero-code one after ``uninstrument()``: its handlers stay, inert
        return False
    return current is None or (current._auto and not candidate._auto)


def owner_on(node: Any) -> Owner | None:
    """The ``OtelHooks`` on the ``HookRegistry`` a node's agent receives, if any (the app's own
    before the zero-code instrumentor's, following ``propagate_to`` forwarders as events do).

    A custom agent emits no events, so no handler ever claims its provider calls; the
    plugin traces them only when the registry that agent is given carries an ``OtelHooks``.
    """
    # Read once per new engine scope (every tool call has one), so flowra's plain types are read
    # inline; ``services_of`` and ``registry_handlers`` cover anything else.
    get = getattr(getattr(node, "scope", None), "get_services", None)
    services = get() if get is not None else None
    registry = services.get(HookRegistry) if type(services) is dict else services_of(node).get(HookRegistry)
    if registry is None:
        return None
    return _owner_in(registry, 0)


def _owner_in(registry: Any, depth: int) -> Owner | None:
    if type(registry) is HookRegistry:
        handlers = handler_map(registry).get(events.BeforeLLMCallEvent) or ()
    else:
        handlers = registry_handlers(registry, events.BeforeLLMCallEvent) or ()
    owner: Owner | None = None
    for handler in handlers:
        if is_plugin_handler(handler) and takes_over(owner, handler.__self__):
            owner = handler.__self__
    if owner is None or not owner._auto or depth >= 8:
        return owner
    # Only the zero-code one here: an app's own OtelHooks this registry forwards to takes over.
    for handler in handlers:
        target = forward_target(handler)
        found = _owner_in(target, depth + 1) if target is not None else None
        if found is not None and not found._auto:
            return found
    return owner


_TEXT_DELTA, _THINKING_DELTA = DELTA_EVENTS


def is_streaming(registry: Any) -> bool:
    """Whether flowra will stream this registry's LLM calls (a delta handler is registered)."""
    if type(registry) is HookRegistry:  # flowra's has_handlers, read straight off its handler dict
        handlers = handler_map(registry)
        return bool(handlers.get(_TEXT_DELTA) or handlers.get(_THINKING_DELTA))
    has = getattr(registry, "has_handlers", None)
    if has is None:
        return False
    return any(bool(has(cls)) for cls in DELTA_EVENTS)


__all__ = ["PLUGIN_HANDLERS", "is_plugin_handler", "is_streaming", "may_be_traced", "owner_on", "takes_over"]
