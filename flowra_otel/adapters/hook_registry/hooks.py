"""``HookRegistryAdapter``: the flowra 0.0.3 - 0.0.8 ``HookProvider`` behind ``OtelHooks``.

    hooks.add(OtelHooks())          # or OtelHooks().install(runtime)

It subscribes to the tool-loop events (never to the streaming delta events: a delta handler
would switch flowra to streaming) and hands each event to the run's ``SpanBook``. The book,
not this object, holds per-run state, so one ``OtelHooks`` can serve many registries,
runtimes and concurrent runs.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Final

from ...core.options import TraceOptions
from ...core.safety import internal_error
from ...core.telemetry import Telemetry
from . import patches, registry_view
from ._flowra import (
    DELTA_EVENTS,
    SPAN_EVENTS,
    TRACED_EVENTS,
    HookContext,
    HookRegistry,
    registry_handlers,
    remove_handlers,
    runtime_services,
)

logger = logging.getLogger("flowra_otel")


class HookRegistryAdapter:
    """Turns every flowra 0.0.3 - 0.0.8 agent run on a registry into GenAI spans and metrics.

    The ``HookProvider`` registered on flowra's registries; built by ``flowra_otel.OtelHooks``
    (whose docstring lists the options) or by the zero-code instrumentor.
    """

    # __weakref__: an owner of the patches (patches._owners)
    __slots__ = ("__weakref__", "_auto", "_disabled", "_retired", "options", "telemetry")

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry: Final[Telemetry] = telemetry
        self.options: Final[TraceOptions] = telemetry.options
        self._auto = False  # True only for the zero-code instrumentor's instance
        self._retired = False  # the zero-code instrumentor's, after uninstrument(): traces nothing
        self._disabled = telemetry.disabled
        if not self._disabled:
            patches.install(self)

    def install(self, runtime: Any) -> Callable[[], None]:
        """Trace every agent of ``runtime``: adds this adapter to the ``HookRegistry`` the runtime
        gives its agents (0.0.8 always has one; on older releases one is provided if the app gave
        none, as a runtime-wide service). Returns what takes it off again (``uninstall``'s
        arguments bound: ``OtelHooks.install`` hands it out as ``Installation``)."""
        services = runtime_services(runtime)
        previous = services.get(HookRegistry, _ABSENT)
        registry = previous
        if not isinstance(registry, HookRegistry):
            registry = services[HookRegistry] = HookRegistry()
        registry.add(self)
        return functools.partial(uninstall, self, services, registry, previous)

    def register_hooks(self, registry: HookRegistry) -> None:
        """``HookProvider`` protocol: subscribe to the tool-loop events on ``registry``.

        An ``OtelHooks`` the app adds itself takes over from the one the zero-code
        instrumentor put on the registry, so the app's own options (content capture,
        redaction, providers) are the ones that apply.
        """
        if not self._auto:
            _drop_auto_handlers(registry)
        if self._disabled:
            return
        for event_type in SPAN_EVENTS:
            registry.on(event_type, self._on_event)
            if type(registry) is not HookRegistry:
                self._register_as_is(registry, event_type)

    def _register_as_is(self, registry: HookRegistry, event_type: type[Any]) -> None:
        """A subclass's own ``on`` may wrap the handler (a timing or error-logging registry) or
        keep it elsewhere: then it is also registered as is, with flowra's own ``on``, so the
        plugin can tell which events an ``OtelHooks`` sees (``registry_view``). The wrapped one
        still runs as the subclass arranged; it only claims an event the plugin traces once."""
        for handler in registry_handlers(registry, event_type) or ():
            if getattr(handler, "__self__", None) is self and registry_view.is_plugin_handler(handler):
                return
        try:
            HookRegistry.on(registry, event_type, self._on_event)
        except Exception:  # not a HookRegistry underneath (its __init__ never ran): not traceable
            logger.warning("flowra_otel: %s keeps no flowra handler list; its events are not traced", type(registry))

    @staticmethod
    def child_registry(
        parent: HookRegistry, *, agent_path: str | None = None, agent_type: type[Any] | None = None
    ) -> HookRegistry:
        """An isolated child registry for a sub-agent that still traces into ``parent``.

        Use it where a parent agent gives its children their own registry
        (``services.provide(HookRegistry, OtelHooks.child_registry(hooks, agent_path="planner"))``).
        It forwards the tool-loop events to ``parent`` (so the parent's ``OtelHooks`` and any
        redaction hooks there see them, once) and stamps ``HookContext(agent_path=...)``, which
        becomes the child's ``gen_ai.agent.name``. Streaming delta events are forwarded only if
        ``parent`` already has delta handlers: forwarding them otherwise would switch the child
        agent to streaming.
        """
        context = HookContext(agent_type=agent_type, agent_path=agent_path) if agent_path is not None else None
        child = HookRegistry(context=context)
        forwarded = list(TRACED_EVENTS) + [t for t in DELTA_EVENTS if parent.has_handlers(t)]
        child.propagate_to(parent, only=forwarded)
        return child

    def _on_event(self, event: Any) -> None:
        step = patches.current_step()
        if step is None or self._retired:
            return
        try:
            step.book.claim(self, step, event.data, event.context)
        except Exception:
            internal_error(f"flowra_otel: internal error handling {type(event.data)}; the agent is unaffected")

    def __repr__(self) -> str:
        return f"HookRegistryAdapter(capture_content={self.options.capture_content})"


registry_view.PLUGIN_HANDLERS.add(HookRegistryAdapter._on_event)


_ABSENT: Final = object()
"""``install``'s note that the runtime had no ``HookRegistry`` service at all."""


def uninstall(adapter: HookRegistryAdapter, services: dict[type, Any], registry: HookRegistry, previous: Any) -> None:
    """Take ``adapter`` off the registry ``install`` added it to: its handlers leave flowra's lists
    (a list left empty goes too: flowra's ``on`` made it for them, and ``propagate_to`` forwards
    every event type that has a list), and a registry ``install`` provided, unchanged since, leaves
    the runtime's services (what was there before is put back). Again: nothing left to do."""
    emptied = remove_handlers(registry, adapter)
    if registry is not previous and services.get(HookRegistry) is registry and emptied:
        if previous is _ABSENT:
            del services[HookRegistry]
        else:
            services[HookRegistry] = previous


def _drop_auto_handlers(registry: HookRegistry) -> None:
    for event_type in TRACED_EVENTS:
        current = registry_handlers(registry, event_type)
        if current:
            current[:] = [
                h
                for h in current
                if not (isinstance(owner := getattr(h, "__self__", None), HookRegistryAdapter) and owner._auto)
            ]
