"""Zero-code set-up: ``opentelemetry-instrument python app.py`` exports as `configure_telemetry` does.

``opentelemetry-instrument`` (from ``opentelemetry-instrumentation``) starts the app with three
kinds of plugins, found by entry point, in this order:

1. one *distro* (group ``opentelemetry_distro``): ``OTEL_PYTHON_DISTRO`` names it, else the first
   one installed is used;
2. one *configurator* (group ``opentelemetry_configurator``), which installs the tracer and meter
   providers and their exporters: ``OTEL_PYTHON_CONFIGURATOR`` names it, else the first installed;
3. every *instrumentor* (group ``opentelemetry_instrumentor``), ours among them
   (``flowra_otel.instrumentor``).

This package registers a distro and a configurator, both named ``flowra``. The configurator
calls `configure_telemetry` with no arguments, so an unmodified app under
``opentelemetry-instrument`` gets exactly what ``configure_telemetry()`` would give it from the
same variables: OTLP over ``http/protobuf`` unless ``OTEL_EXPORTER_OTLP_PROTOCOL`` says ``grpc``,
metrics only where they can go (a trace-only endpoint means no metric exporter), the trace tree on
stdout when no endpoint is set, ``FLOWRA_OTEL_TRACES_FILE`` for a file the audit reads, logs
only as ``configure_telemetry`` decides, and an exit bounded to about 2 s with the backend down.
``OTEL_TRACES_EXPORTER`` is not read (the endpoints decide, as in ``configure_telemetry``).

Why not ``opentelemetry-distro``: its distro sets ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` and
``OTEL_{TRACES,METRICS,LOGS}_EXPORTER=otlp`` by default, so a trace-only HTTP endpoint (the one
Jaeger, Tempo or Phoenix take) was dialled with gRPC, metrics and logs went to port 4317, nothing
was delivered and the exit took 14 s while the exporters retried. The ``[instrument]`` extra
therefore installs ``opentelemetry-instrumentation`` only.

With ``opentelemetry-distro`` installed as well, whichever distro comes first wins (the order is
the file system's). Ours, when it wins, makes our configurator the one used
(``OTEL_PYTHON_CONFIGURATOR=flowra`` unless that variable is set) and keeps the launcher from
warning that it skipped the other one. When the other distro wins, our instrumentor says so once,
with the fix: ``OTEL_PYTHON_DISTRO=flowra OTEL_PYTHON_CONFIGURATOR=flowra`` (or uninstalling
``opentelemetry-distro``). Choosing a distro or configurator with those variables is respected.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Final

from .core.export import configure_telemetry

if TYPE_CHECKING:
    # opentelemetry-instrumentation marks its distro module ``# type: ignore`` (so to mypy it is
    # empty): this typed stand-in declares the part of BaseDistro's API used here.
    class BaseDistro:
        _instance: BaseDistro | None

        def configure(self, **kwargs: Any) -> None: ...
        def _configure(self, **kwargs: Any) -> None: ...

else:
    from opentelemetry.instrumentation.distro import BaseDistro

__all__ = [
    "NAME",
    "OTHER_DISTRO_WARNING",
    "FlowraConfigurator",
    "FlowraDistro",
    "other_distro_in_charge",
    "warn_if_another_distro_is_in_charge",
]

NAME: Final = "flowra"
"""The name of both entry points: ``OTEL_PYTHON_DISTRO=flowra``, ``OTEL_PYTHON_CONFIGURATOR=flowra``."""

OTEL_PYTHON_DISTRO: Final = "OTEL_PYTHON_DISTRO"
OTEL_PYTHON_CONFIGURATOR: Final = "OTEL_PYTHON_CONFIGURATOR"

OTHER_DISTRO_WARNING: Final = (
    "flowra_otel: opentelemetry-instrument set this process up with the distro {distro}, not "
    "flowra-otel's, so its defaults apply (for opentelemetry-distro: OTLP over gRPC, metrics and logs "
    "to the same endpoint) instead of configure_telemetry's. Set OTEL_PYTHON_DISTRO=flowra and "
    "OTEL_PYTHON_CONFIGURATOR=flowra, or uninstall opentelemetry-distro (flowra-otel[instrument] does "
    "not need it)."
)

_LAUNCHER_LOGGER: Final = "opentelemetry.instrumentation.auto_instrumentation._load"
_SKIPPED_MESSAGES: Final = frozenset(
    {
        "Configuration of %s not loaded, %s already loaded",
        "Configuration of %s not loaded because %s is set by %s",
    }
)

_logger = logging.getLogger("flowra_otel")

_state = {"configured": False, "warned": False}
"""``configured``: our configurator has run in this process; ``warned``: the other-distro warning
was given (once per process)."""


class _QuietAboutSkippedConfigurators(logging.Filter):
    """Drops the launcher's warning that it skipped another configurator because ours was chosen
    (our distro chose it on purpose; the warning would read like a fault)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg in _SKIPPED_MESSAGES and len(args) >= 2 and args[1] == NAME)


class FlowraDistro(BaseDistro):
    """The ``flowra`` distro: makes the ``flowra`` configurator the one ``opentelemetry-instrument``
    uses (unless ``OTEL_PYTHON_CONFIGURATOR`` names another) and sets no other default."""

    def _configure(self, **kwargs: Any) -> None:
        os.environ.setdefault(OTEL_PYTHON_CONFIGURATOR, NAME)
        launcher = logging.getLogger(_LAUNCHER_LOGGER)
        if not any(isinstance(f, _QuietAboutSkippedConfigurators) for f in launcher.filters):
            launcher.addFilter(_QuietAboutSkippedConfigurators())


class FlowraConfigurator:
    """The ``flowra`` configurator: ``configure_telemetry()`` from the environment.

    A bad variable (``OTEL_EXPORTER_OTLP_PROTOCOL=http/json``, say) raises here, as
    ``configure_telemetry`` does in code; ``opentelemetry-instrument`` logs it and runs the app
    untraced.
    """

    def configure(self, **kwargs: Any) -> None:
        """Called once by ``opentelemetry-instrument`` (``auto_instrumentation_version=...``)."""
        configure_telemetry()
        _state["configured"] = True


def other_distro_in_charge() -> str | None:
    """The distro class (``module:Class``) that set this process up instead of ours when our
    configurator did not run and neither ``OTEL_PYTHON_DISTRO`` nor ``OTEL_PYTHON_CONFIGURATOR``
    chose on purpose; else None."""
    if _state["configured"] or os.environ.get(OTEL_PYTHON_DISTRO) or os.environ.get(OTEL_PYTHON_CONFIGURATOR):
        return None
    pending: list[type[Any]] = list(BaseDistro.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls is not FlowraDistro and cls.__name__ != "DefaultDistro" and cls.__dict__.get("_instance") is not None:
            return f"{cls.__module__}:{cls.__qualname__}"
    return None


def warn_if_another_distro_is_in_charge() -> None:
    """Log `OTHER_DISTRO_WARNING` once per process if `other_distro_in_charge` names one (the
    instrumentors call this when ``opentelemetry-instrument`` loads them)."""
    if _state["warned"]:
        return
    distro = other_distro_in_charge()
    if distro is not None:
        _state["warned"] = True
        _logger.warning(OTHER_DISTRO_WARNING.format(distro=distro))
