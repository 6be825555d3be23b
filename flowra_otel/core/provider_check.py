"""The one warning for the commonest silent mistake: tracing installed, no SDK set up.

Why: ``OtelHooks().install(runtime)`` records through the *global* tracer provider unless given
one. Until something installs an SDK provider (``configure_telemetry()``, ``opentelemetry-instrument``
or the app's own ``trace.set_tracer_provider``), that global is the OpenTelemetry API's placeholder
(a ``ProxyTracerProvider``), every span is a no-op, and nothing is printed or exported, even with
``OTEL_EXPORTER_OTLP_*`` set (those variables are read by the SDK, which is not there). flowra runs
exactly as before and nothing says why the backend stays empty.

When: the first run that starts with an `OtelHooks` on the global provider looks once (one
``isinstance``, then never again in the process). Checking at the first run and not when
``OtelHooks`` is built lets an app install first and configure right after. Any provider that
is not the placeholder counts as configured (an SDK one, another vendor's, or ``NoOpTracerProvider``
set on purpose), and so does ``OTEL_SDK_DISABLED=true``. The zero-code instrumentors give their
own warning (for ``opentelemetry-instrument`` set-ups) and mark this one as said, so a process
gets one warning, not two.
"""

from __future__ import annotations

import logging
import os
from typing import Final

from opentelemetry import trace
from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED

__all__ = [
    "INSTRUMENTOR_WARNING",
    "NO_SDK_WARNING",
    "check_global_tracer_provider",
    "mark_said",
    "warn_instrumentor_without_provider",
]

logger = logging.getLogger("flowra_otel")

NO_SDK_WARNING: Final = (
    "flowra_otel: a flowra run started with OtelHooks, but no OpenTelemetry SDK tracer provider is set "
    "(the global one is still the API's no-op placeholder), so its spans go nowhere: no tree is printed "
    "and nothing is exported, whatever the OTEL_* variables say. Fix: call "
    "flowra_otel.export.configure_telemetry() once at start-up, before the first run (or install your own "
    "with opentelemetry.trace.set_tracer_provider(...), or pass OtelHooks(tracer_provider=...))."
)

INSTRUMENTOR_WARNING: Final = (
    "flowra_otel: FlowraInstrumentor is tracing flowra agents, but no OpenTelemetry tracer provider "
    "is installed, so their spans go nowhere. With opentelemetry-instrument: install flowra-otel's "
    "distro (pip install 'flowra-otel[instrument]'), or name it (OTEL_PYTHON_CONFIGURATOR=flowra). "
    "In code: call flowra_otel.export.configure_telemetry() before the agents are built, or pass "
    "instrument(tracer_provider=...)."
)
"""The zero-code instrumentors' wording: their users set up with ``opentelemetry-instrument``."""

_state = {"done": False, "instrumentor_done": False}
"""``done``: looked (or warned elsewhere) in this process; never again. ``instrumentor_done``: the
instrumentors' warning was given (once per process, whichever flowra line's instrumentor)."""


def mark_said() -> None:
    """Another part of the plugin (a zero-code instrumentor) gave its own warning about this."""
    _state["done"] = True


def check_global_tracer_provider() -> None:
    """Warn once per process if the global tracer provider is still the API's placeholder.

    Called by the adapters when a run's root span starts with an `OtelHooks` that uses the global
    provider; after the first call it costs one dict lookup."""
    if _state["done"]:
        return
    _state["done"] = True
    if os.environ.get(OTEL_SDK_DISABLED, "").strip().lower() == "true":
        return  # switched off on purpose
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        logger.warning(NO_SDK_WARNING)


def warn_instrumentor_without_provider() -> None:
    """The zero-code instrumentors' check, when their first runtime or registry is built: warn once
    per process if the global tracer provider is still the API's placeholder, and mark the run-time
    warning as said (one warning a process, not two)."""
    if _state["instrumentor_done"]:
        return
    if os.environ.get(OTEL_SDK_DISABLED, "").strip().lower() == "true":
        return  # switched off on purpose
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        _state["instrumentor_done"] = True
        mark_said()  # this warning replaces the one at the first run
        logger.warning(INSTRUMENTOR_WARNING)
