"""Zero-code instrumentation entry point (``opentelemetry-instrument python app.py``).

The ``opentelemetry_instrumentor`` entry point ``flowra`` names ``FlowraInstrumentor`` here; it
is the installed flowra line's instrumentor (``flowra_otel.adapters.<line>.instrumentor``, which
needs the ``[instrument]`` extra). On a flowra this package does not support, importing it raises
``UnsupportedFlowraError``, which ``opentelemetry-instrument`` reports (and the app runs untraced).
"""

import importlib
from typing import Any

from . import adapters

FlowraInstrumentor: Any = importlib.import_module(f"{adapters.current().__name__}.instrumentor").FlowraInstrumentor

__all__ = ["FlowraInstrumentor"]
