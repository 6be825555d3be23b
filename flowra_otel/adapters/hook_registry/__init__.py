"""The adapter for flowra 0.0.3 - 0.0.8: the ``HookRegistry`` / ``HookProvider`` API.

It subscribes to the tool-loop events, patches flowra's engine, emit and provider call to know
which node each step runs and when every hook of an event has run (``patches``, ``span_book``,
``step_scope``, ``registry_view``), and turns what it sees into the core's invocation objects.
``_flowra`` is the only module that reads flowra's private names. ``instrumentor`` (zero-code)
needs the optional ``opentelemetry-instrumentation`` and is imported only by its entry point.
"""

from .hooks import HookRegistryAdapter as Adapter
from .messages import text_result_content

__all__ = ["Adapter", "text_result_content"]
