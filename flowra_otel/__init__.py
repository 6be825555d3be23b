"""OpenTelemetry GenAI tracing and metrics for flowra agents.

    from flowra_otel import OtelHooks
    OtelHooks().install(runtime)      # or, on flowra 0.0.3 - 0.0.8: hooks.add(OtelHooks())

Layout: ``flowra_otel.core`` knows OpenTelemetry and the GenAI conventions and nothing of flowra;
``flowra_otel.adapters`` holds one adapter per flowra hook API; ``OtelHooks`` picks the one for
the installed flowra.
"""

from .adapters import SUPPORTED, UnsupportedFlowraError
from .core.version import VERSION
from .hooks import OtelHooks

__version__ = VERSION

__all__ = ["SUPPORTED", "OtelHooks", "UnsupportedFlowraError", "__version__"]
