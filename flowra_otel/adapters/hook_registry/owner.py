"""``Owner``: what the span book, the step scope and the registry view need of the ``OtelHooks``
that traces a run (flowra 0.0.3 - 0.0.8).

Why a protocol: those modules are imported by the adapter (``hooks.HookRegistryAdapter``), so
they must not import it back, not even for a type. They need its telemetry handle, its options and
whether it is the zero-code instrumentor's (an app's own ``OtelHooks`` takes over from that one).
"""

from __future__ import annotations

from typing import Protocol

from ...core.options import TraceOptions
from ...core.telemetry import Telemetry


class Owner(Protocol):
    """The ``OtelHooks`` (its adapter) whose handlers traced an event first."""

    @property
    def telemetry(self) -> Telemetry:
        """The tracer, instruments and options the run's invocations are made with."""

    @property
    def options(self) -> TraceOptions:
        """The validated options (``telemetry.options``)."""

    @property
    def _auto(self) -> bool:
        """True for the zero-code instrumentor's adapter, which an app's own one replaces."""

    @property
    def _retired(self) -> bool:
        """True for the zero-code instrumentor's adapter once ``uninstrument()`` ran: its handlers
        stay on the registries made while instrumented (flowra cannot remove them) and trace nothing."""


__all__ = ["Owner"]
