"""Zero-code instrumentation: ``opentelemetry-instrument python app.py`` traces a flowra app.

The ``opentelemetry_instrumentor`` entry point ``flowra`` names `FlowraInstrumentor`, so
``opentelemetry-instrument`` (from ``opentelemetry-instrumentation``) finds it by itself; in code::

    from flowra_otel.instrumentor import FlowraInstrumentor
    FlowraInstrumentor().instrument()          # before the app builds its HookRegistry / AgentRuntime

How: flowra agents emit their events on a ``flowra.agent.HookRegistry`` (the app's own, or the
one ``AgentRuntime`` / older ``ToolLoopAgent`` versions create when none is given). Instrumenting
wraps ``HookRegistry.__init__`` so that every registry created from then on carries one shared
`OtelHooks`, exactly as if the app had written ``hooks.add(OtelHooks())``. Registries that already
exist are left alone. A child registry (``OtelHooks.child_registry``, or any registry that
forwards with ``propagate_to``) gets the hooks too; each event is still traced once, by the app's
own `OtelHooks` if one sees it (on the child or where it forwards), else by the first that sees
it. An `OtelHooks` the app adds itself to a registry replaces the instrumentor's on that
registry, so the app's own options (content capture, redaction, providers) always apply to its
agents.

Keyword arguments of ``instrument()`` are passed to `OtelHooks` (``tracer_provider``,
``meter_provider``, ``capture_content``, ...); without them the global providers are used (set
up by ``opentelemetry-instrument`` before instrumentors run) and content capture follows
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.

What ``opentelemetry-instrument`` exports is set up by this package's distro and configurator
(``flowra_otel.distro``): ``configure_telemetry()`` from the same variables. Nothing exported is
the classic zero-code failure: ``opentelemetry-instrument`` with no configurator (or one named
by ``OTEL_PYTHON_CONFIGURATOR`` that is not installed) loads the instrumentors but installs no
tracer provider, so the app runs, traces nothing visible and says nothing. When the
first ``HookRegistry`` is created after ``instrument()`` (without an explicit ``tracer_provider``)
and the global tracer provider is still the API's placeholder, a warning says so, once per
process, with the fix. It is checked then and not inside ``instrument()``, because an app may
instrument first and call ``configure_telemetry()`` right after.

``uninstrument()`` puts ``HookRegistry.__init__`` back, retires the instrumentor's `OtelHooks`
(registries created while instrumented keep its handlers, since flowra offers no way to remove a
handler, but they trace nothing any more) and lets go of its hold on the plugin's patches of
flowra: they are removed once no `OtelHooks` the app added itself needs them (those keep tracing
as before); building an `OtelHooks`, or instrumenting again, installs them again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Final

import wrapt

from ... import distro
from ...core import provider_check
from ...core.telemetry import Telemetry
from . import patches
from ._flowra import HookRegistry
from .hooks import HookRegistryAdapter

if TYPE_CHECKING:
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

__all__ = ["FlowraInstrumentor"]

from ...core.safety import internal_error

logger = logging.getLogger("flowra_otel")

_INSTRUMENTS: Final = ("flowra >= 0.0.3, < 0.0.9",)
_INIT: Final = "__init__"

_lock = threading.Lock()
_state: dict[str, Any] = {}
"""``original``: ``HookRegistry.__dict__['__init__']`` before wrapping; ``hooks``: the shared
`OtelHooks`; ``check_provider``: whether the next new registry should look for a tracer provider.
Module state, not instance state: `BaseInstrumentor` is a singleton whose ``__init__`` runs again
on every ``FlowraInstrumentor()``."""


NO_PROVIDER_WARNING: Final = provider_check.INSTRUMENTOR_WARNING


def _warn_if_spans_go_nowhere() -> None:
    """On the first new runtime or registry after ``instrument()``: the one-per-process warning."""
    if _state.pop("check_provider", False) is True:
        provider_check.warn_instrumentor_without_provider()


def _registry_init_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> None:
    wrapped(*args, **kwargs)
    hooks = _state.get("hooks")
    if hooks is None:
        return
    if "check_provider" in _state:
        try:
            _warn_if_spans_go_nowhere()
        except Exception:
            logger.debug("flowra_otel: could not check the global tracer provider", exc_info=True)
    try:
        instance.add(hooks)
    except Exception:
        internal_error("flowra_otel: could not add OtelHooks to a new HookRegistry; the agent is unaffected")


def _is_wrapped() -> bool:
    current = HookRegistry.__dict__.get(_INIT)
    return isinstance(current, wrapt.FunctionWrapper) and getattr(current, "_self_wrapper", None) is (
        _registry_init_wrapper
    )


class FlowraInstrumentor(BaseInstrumentor):
    """Adds an `OtelHooks` to every flowra ``HookRegistry`` created while instrumented."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        hooks = HookRegistryAdapter(Telemetry.build(**kwargs))  # validates the options, installs the patches
        hooks._auto = True  # an OtelHooks the app adds to a registry replaces this one there
        with _lock:
            _state["hooks"] = hooks
            _state["check_provider"] = kwargs.get("tracer_provider") is None
            if not _is_wrapped():
                _state["original"] = HookRegistry.__dict__[_INIT]
                wrapt.wrap_function_wrapper(HookRegistry, _INIT, _registry_init_wrapper)
        if kwargs.get("tracer_provider") is None:
            try:  # opentelemetry-distro's defaults instead of configure_telemetry's: say so, once
                distro.warn_if_another_distro_is_in_charge()
            except Exception:
                logger.debug("flowra_otel: could not check which distro set the process up", exc_info=True)

    def _uninstrument(self, **kwargs: Any) -> None:
        with _lock:
            original = _state.pop("original", None)
            hooks = _state.pop("hooks", None)
            _state.pop("check_provider", None)
            if original is not None and _is_wrapped():
                setattr(HookRegistry, _INIT, original)
        if hooks is not None:
            hooks._retired = True  # its handlers stay on the registries it was added to, inert
            patches.uninstall(hooks)  # kept while an OtelHooks of the app's own needs them

    @property
    def hooks(self) -> HookRegistryAdapter | None:
        """The `OtelHooks` added to new registries while instrumented, else None."""
        hooks: HookRegistryAdapter | None = _state.get("hooks")
        return hooks
