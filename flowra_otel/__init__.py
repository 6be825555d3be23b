"""OpenTelemetry GenAI tracing and metrics for flowra agents.

    from flowra_otel import OtelHooks
    OtelHooks().install(runtime)      # or, on flowra 0.0.3 - 0.0.8: hooks.add(OtelHooks())

Layout: ``flowra_otel.core`` knows OpenTelemetry and the GenAI conventions and nothing of flowra;
``flowra_otel.adapters`` holds one adapter per flowra hook API; ``OtelHooks`` picks the one for
the installed flowra.

Why the names below are loaded on first use (PEP 562): importing a submodule imports this package
first, and two submodules are loaded where nothing of the plugin is wanted yet, the pytest plugin
(``flowra_otel.pytest_plugin``, which pytest loads in every test session of an app that has the
package installed) and the ``opentelemetry-instrument`` entry points. ``from flowra_otel import
OtelHooks`` is unchanged.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.version import VERSION

if TYPE_CHECKING:
    from .adapters import SUPPORTED, UnsupportedFlowraError
    from .hooks import OtelHooks

__version__ = VERSION

__all__ = ["SUPPORTED", "OtelHooks", "UnsupportedFlowraError", "__version__"]

_LAZY = {"OtelHooks": ".hooks", "SUPPORTED": ".adapters", "UnsupportedFlowraError": ".adapters"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
