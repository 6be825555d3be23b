"""``RuntimeHooksAdapter``: the flowra 0.0.47 - 0.0.93 side of ``OtelHooks``.

    OtelHooks().install(runtime)

It subscribes a ``RuntimeTracing`` to ``runtime.hooks`` (the agent, LLM-call and tool-call
spans, the turn's content events; never the streaming delta events, whose handlers would switch
flowra to streaming) and patches ``HooksImpl.emit`` once per process (``emit_patch``), as it
does flowra's MCP client (``mcp_client``) and the run loop, to tell a timeout (``run_timeout``). One adapter
can trace many runtimes; each runtime is traced by one ``OtelHooks`` (the app's own replaces the
zero-code instrumentor's).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

from ...core.options import TraceOptions
from ...core.telemetry import Telemetry
from . import _flowra, emit_patch, mcp_client, run_timeout
from .tracing import RuntimeTracing


class RuntimeHooksAdapter:
    """Turns every flowra 0.0.47 - 0.0.93 agent run of the runtimes it is installed on into GenAI
    spans and metrics. Built by ``flowra_otel.OtelHooks`` (whose docstring lists the options) or by
    the zero-code instrumentor."""

    __slots__ = ("__weakref__", "_auto", "options", "telemetry")  # weak: an owner of the emit and MCP patches

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry: Final[Telemetry] = telemetry
        self.options: Final[TraceOptions] = telemetry.options
        self._auto = False  # True only for the zero-code instrumentor's instance
        if not telemetry.disabled:
            emit_patch.install(self)
            mcp_client.install(self)
            run_timeout.install(self)

    def install(self, runtime: Any) -> Callable[[], None]:
        """Trace every agent run of ``runtime``; returns what takes this tracing off it again
        (``uninstall``'s arguments bound: ``OtelHooks.install`` hands it out as ``Installation``).

        Raises:
            TypeError: ``runtime`` is not a flowra 0.0.47 - 0.0.93 ``AgentRuntime``.
            ValueError: another ``OtelHooks`` (not the zero-code one) already traces it.
        """
        _flowra.check(runtime)
        if self.telemetry.disabled:
            return _nothing
        for tracing in tracings_of(runtime):
            if tracing.adapter is self:
                return functools.partial(uninstall, runtime, tracing)  # installed already: once is enough
            if tracing.adapter._auto and not self._auto:
                _flowra.remove_global(runtime.hooks, tracing)  # the app's own options apply
            elif self._auto:
                return _nothing  # the app installed its own: the zero-code one stays out
            else:
                msg = "another OtelHooks already traces this runtime; install one per runtime"
                raise ValueError(msg)
        return functools.partial(uninstall, runtime, RuntimeTracing(self, runtime))

    def __repr__(self) -> str:
        return f"RuntimeHooksAdapter(capture_content={self.options.capture_content})"


def uninstall(runtime: Any, tracing: RuntimeTracing) -> None:
    """Take ``tracing`` off ``runtime``: its subscriptions leave flowra's handler storage as if they
    had never been made (``_flowra.remove_global``), so later runs are not traced and another
    ``OtelHooks`` may install. Again, or after the zero-code instrumentor removed it: nothing to do.

    Raises:
        RuntimeError: ``runtime`` is running (a run's spans would be left half traced); nothing removed.
    """
    if _flowra.root_node_id(runtime) is not None:
        msg = "cannot uninstall OtelHooks from a runtime while it runs; uninstall between runs"
        raise RuntimeError(msg)
    _flowra.remove_global(runtime.hooks, tracing)


def _nothing() -> None:
    """What ``install`` hands back when it subscribed nothing (tracing disabled, or the zero-code
    instrumentor on a runtime the app traces itself)."""


def tracings_of(runtime: Any) -> list[RuntimeTracing]:
    """The tracings subscribed to ``runtime`` (by their agent-span handler)."""
    handlers = _flowra.global_handlers(runtime.hooks, _flowra.AgentSpan, spans=True)
    return [owner for h in handlers if isinstance(owner := getattr(h, "__self__", None), RuntimeTracing)]


emit_patch.MARKERS.add(RuntimeTracing.on_event)

__all__ = ["RuntimeHooksAdapter", "tracings_of", "uninstall"]
