"""Zero-code instrumentation for flowra 0.0.47 - 0.0.93: ``opentelemetry-instrument python app.py``.

The ``opentelemetry_instrumentor`` entry point ``flowra`` names ``flowra_otel.instrumentor``'s
`FlowraInstrumentor`, which is this class on these releases; in code::

    from flowra_otel.instrumentor import FlowraInstrumentor
    FlowraInstrumentor().instrument()          # before the app builds its AgentRuntime

How: every flowra agent of these releases runs in an ``AgentRuntime``, whose ``runtime.hooks``
is where ``OtelHooks().install(runtime)`` subscribes. Instrumenting wraps ``AgentRuntime.__init__``
so that every runtime created from then on is traced by one shared adapter, exactly as if the
app had written ``OtelHooks().install(runtime)``. Runtimes that already exist are left alone. An
`OtelHooks` the app installs itself on a runtime replaces the instrumentor's there (its
subscriptions are removed), so the app's own options (content capture, redaction, providers)
always apply to its agents.

Keyword arguments of ``instrument()`` are passed to `OtelHooks` (``tracer_provider``,
``meter_provider``, ``capture_content``, ...); without them the global providers are used (set
up by ``opentelemetry-instrument`` before instrumentors run) and content capture follows
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.

What ``opentelemetry-instrument`` exports is set up by this package's distro and configurator
(``flowra_otel.distro``): ``configure_telemetry()`` from the same variables. Nothing exported is
the classic zero-code failure: ``opentelemetry-instrument`` with no configurator (or one named
by ``OTEL_PYTHON_CONFIGURATOR`` that is not installed) loads the instrumentors but installs no
tracer provider, so the app runs, traces nothing visible and says nothing. When the
first ``AgentRuntime`` is created after ``instrument()`` (without an explicit ``tracer_provider``)
and the global tracer provider is still the API's placeholder, a warning says so, once per
process, with the fix. It is checked then and not inside ``instrument()``, because an app may
instrument first and call ``configure_telemetry()`` right after.

``uninstrument()`` puts ``AgentRuntime.__init__`` back, removes the instrumentor's subscriptions
from the runtimes it traced (they run untraced from then on) and lets go of its hold on the
``HooksImpl.emit`` patch: flowra's own ``emit`` is put back once no `OtelHooks` the app built
itself needs it (those keep tracing as before); building an `OtelHooks`, or instrumenting again,
installs it again.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Final

import wrapt

from ... import distro
from ...core import provider_check
from ...core.telemetry import Telemetry
from . import _flowra, emit_patch, mcp_client, run_timeout
from ._flowra import AgentRuntime
from .adapter import RuntimeHooksAdapter, tracings_of

if TYPE_CHECKING:
    from .tracing import RuntimeTracing

    # opentelemetry-instrumentation marks its instrumentor module ``# type: ignore`` (so to mypy it
    # is empty): this typed stand-in declares the part of BaseInstrumentor's API used here.
    class BaseInstrumentor:
        def instrument(self, **kwargs: Any) -> Any: ...
        def uninstrument(self, **kwargs: Any) -> Any: ...
        @property
        def is_instrumented_by_opentelemetry(self) -> bool: ...
        def _check_dependency_conflicts(self) -> Any: ...
        def instrumentation_dependencies(self) -> Collection[str]: ...
        def _instrument(self, **kwargs: Any) -> Any: ...
        def _uninstrument(self, **kwargs: Any) -> Any: ...

else:
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

__all__ = ["NO_PROVIDER_WARNING", "FlowraInstrumentor"]

from ...core.safety import internal_error

logger = logging.getLogger("flowra_otel")

_INSTRUMENTS: Final = ("flowra >= 0.0.47, <= 0.0.93",)
_INIT: Final = "__init__"

_lock = threading.Lock()
_state: dict[str, Any] = {}
"""``original``: ``AgentRuntime.__dict__['__init__']`` before wrapping; ``adapter``: the shared
auto adapter; ``check_provider``: whether the next new runtime should look for a tracer provider.
Module state, not instance state: `BaseInstrumentor` is a singleton whose ``__init__`` runs again
on every ``FlowraInstrumentor()``."""

_traced: weakref.WeakSet[RuntimeTracing] = weakref.WeakSet()
"""The auto adapter's tracings (one per runtime created while instrumented), removed by
``uninstrument()``; weak, so a runtime the app dropped is not kept alive."""


NO_PROVIDER_WARNING: Final = provider_check.INSTRUMENTOR_WARNING


def _warn_if_spans_go_nowhere() -> None:
    """On the first new runtime or registry after ``instrument()``: the one-per-process warning."""
    if _state.pop("check_provider", False) is True:
        provider_check.warn_instrumentor_without_provider()


def _runtime_init_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> None:
    wrapped(*args, **kwargs)
    adapter: RuntimeHooksAdapter | None = _state.get("adapter")
    if adapter is None:
        return
    if "check_provider" in _state:
        try:
            _warn_if_spans_go_nowhere()
        except Exception:
            logger.debug("flowra_otel: could not check the global tracer provider", exc_info=True)
    try:
        adapter.install(instance)
        with _lock:
            _traced.update(t for t in tracings_of(instance) if t.adapter is adapter)
    except Exception:
        internal_error("flowra_otel: could not trace a new AgentRuntime; the agent is unaffected")


def _is_wrapped() -> bool:
    current = AgentRuntime.__dict__.get(_INIT)
    return isinstance(current, wrapt.FunctionWrapper) and getattr(current, "_self_wrapper", None) is (
        _runtime_init_wrapper
    )


class FlowraInstrumentor(BaseInstrumentor):
    """Traces every flowra ``AgentRuntime`` created while instrumented (the app's own `OtelHooks`
    replaces it on a runtime)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        adapter = RuntimeHooksAdapter(Telemetry.build(**kwargs))  # validates the options, patches emit
        adapter._auto = True  # an OtelHooks the app installs on a runtime replaces this one there
        with _lock:
            _state["adapter"] = adapter
            _state["check_provider"] = kwargs.get("tracer_provider") is None
            if not _is_wrapped():
                _state["original"] = AgentRuntime.__dict__[_INIT]
                wrapt.wrap_function_wrapper(AgentRuntime, _INIT, _runtime_init_wrapper)
        if kwargs.get("tracer_provider") is None:
            try:  # opentelemetry-distro's defaults instead of configure_telemetry's: say so, once
                distro.warn_if_another_distro_is_in_charge()
            except Exception:
                logger.debug("flowra_otel: could not check which distro set the process up", exc_info=True)

    def _uninstrument(self, **kwargs: Any) -> None:
        with _lock:
            original = _state.pop("original", None)
            adapter = _state.pop("adapter", None)
            _state.pop("check_provider", None)
            if original is not None and _is_wrapped():
                setattr(AgentRuntime, _INIT, original)
            tracings = list(_traced)
            _traced.clear()
        for tracing in tracings:
            try:
                _flowra.remove_global(tracing.runtime.hooks, tracing)
            except Exception:
                internal_error("flowra_otel: could not remove the instrumentor's hooks from a runtime")
        if adapter is not None:
            emit_patch.uninstall(adapter)  # kept while an OtelHooks of the app's own needs it
            mcp_client.uninstall(adapter)
            run_timeout.uninstall(adapter)

    @property
    def hooks(self) -> RuntimeHooksAdapter | None:
        """The adapter installed on new runtimes while instrumented, else None."""
        adapter: RuntimeHooksAdapter | None = _state.get("adapter")
        return adapter
