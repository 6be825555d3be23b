"""Zero-code instrumentation entry point (``opentelemetry-instrument python app.py``).

The ``opentelemetry_instrumentor`` entry point ``flowra`` names ``FlowraInstrumentor`` here; it
is the installed flowra line's instrumentor (``flowra_otel.adapters.<line>.instrumentor``, which
needs the ``[instrument]`` extra).

On a flowra this package does not support (or none), ``FlowraInstrumentor`` is
`UnsupportedFlowraInstrumentor`: ``instrument()`` logs ONE warning line naming the installed and
the supported releases, and the app runs untraced. Raising ``UnsupportedFlowraError`` from the
import instead made ``opentelemetry-instrument`` print a 15-line traceback ("Importing of flowra
failed") before the app's own output, for what is a version mismatch with one fix. This is how
the OpenTelemetry instrumentors treat a library version they do not support (a logged line, no
instrumentation). In code, ``OtelHooks()`` still raises ``UnsupportedFlowraError``.
"""

import importlib
import logging
from typing import Any

from . import adapters

_logger = logging.getLogger("flowra_otel")


class UnsupportedFlowraInstrumentor:
    """The instrumentor on an unsupported flowra: says so once per process, traces nothing."""

    _warned = False

    def instrument(self, **kwargs: Any) -> None:
        if UnsupportedFlowraInstrumentor._warned:
            return
        UnsupportedFlowraInstrumentor._warned = True
        _logger.warning("flowra_otel: %s The app runs untraced.", _ERROR)

    def uninstrument(self, **kwargs: Any) -> None:
        """Nothing was instrumented."""

    @property
    def is_instrumented_by_opentelemetry(self) -> bool:
        return False


_ERROR: str = ""
FlowraInstrumentor: Any
try:
    FlowraInstrumentor = importlib.import_module(f"{adapters.current().__name__}.instrumentor").FlowraInstrumentor
except adapters.UnsupportedFlowraError as unsupported:
    _ERROR = str(unsupported)
    FlowraInstrumentor = UnsupportedFlowraInstrumentor

__all__ = ["FlowraInstrumentor", "UnsupportedFlowraInstrumentor"]
