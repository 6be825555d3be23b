"""OpenTelemetry GenAI tracing and metrics for flowra agents.

from flowra_otel import OtelHooks
hooks.add(OtelHooks())
"""

__version__ = "0.1.0"

from .hooks import OtelHooks

__all__ = ["OtelHooks", "__version__"]
