"""The adapter for flowra 0.0.47 - 0.0.93: ``runtime.hooks`` with ``on`` / ``on_span``.

``tracing`` turns flowra's span types (``AgentSpan``, ``LLMCallSpan``, ``ToolCallSpan``) and the
turn's events into the core's invocation objects; ``frames`` is what follows flowra's execution
tree (a ``FlowingVar``); ``emit_patch`` runs an event's handler loop for the few events acted on
after every hook; ``messages`` reads this line's messages for the content pipeline; ``durable``
keeps a durable run's trace link; ``_flowra`` is the only module that reads flowra's private
names. ``instrumentor`` (zero-code) needs the optional ``opentelemetry-instrumentation``.
"""

from .adapter import RuntimeHooksAdapter as Adapter
from .messages import text_result_content

__all__ = ["Adapter", "text_result_content"]
