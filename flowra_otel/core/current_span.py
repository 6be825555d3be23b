"""Making a span current for the tool it runs or the provider call it times, at the cost of one
dict and one context-variable write.

Why not only the API: the plugin makes a span current twice per LLM call and tool call (the
``chat`` span around the provider call, the ``execute_tool`` span around the tool, so HTTP and
database spans nest under them), and ``trace.set_span_in_context`` + ``context.attach`` +
``context.detach`` are six Python calls around one ``dict`` copy and one ``ContextVar`` write. On
a tool loop that answers at once, that was a fifth of the plugin's own cost over the raw SDK.

The shortcut does exactly what the API does, and only where it provably can: the span key is the
one ``set_span_in_context`` uses (checked at import by building a context both ways), and the
runtime context is the standard ``contextvars`` one (``OTEL_PYTHON_CONTEXT`` unset, checked on
every use). Anything else — another runtime context, an API that stores spans differently — goes
through the API, unchanged.
"""

from __future__ import annotations

import contextlib
import logging
from contextvars import ContextVar, Token
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span

from .safety import internal_error

logger = logging.getLogger("flowra_otel")


def _span_key() -> str | None:
    """The key ``set_span_in_context`` stores the span under, if it stores nothing else."""
    try:
        from opentelemetry.trace.propagation import _SPAN_KEY
    except ImportError:
        return None
    probe = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    built = trace.set_span_in_context(probe, Context({"flowra_otel.probe": 1}))
    if type(built) is not Context or dict(built) != {"flowra_otel.probe": 1, _SPAN_KEY: probe}:
        return None
    return _SPAN_KEY if isinstance(_SPAN_KEY, str) else None


def _runtime_variable() -> tuple[Any, ContextVar[Context] | None]:
    """The runtime context and, when it is the standard one, the ``ContextVar`` it writes."""
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    try:
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
    except ImportError:
        return runtime, None
    variable = getattr(runtime, "_current_context", None)
    if type(runtime) is not ContextVarsRuntimeContext or not isinstance(variable, ContextVar):
        return runtime, None
    return runtime, variable


_KEY: Final = _span_key()
_RUNTIME, _VARIABLE = _runtime_variable()


def context_with(span: Span, parent: Context | None = None) -> Context:
    """``trace.set_span_in_context(span, parent)``: a new context, ``parent`` (default: the
    current one) with ``span`` as its current span."""
    if _KEY is None:
        return trace.set_span_in_context(span, parent)
    if parent is None:
        variable = _VARIABLE
        if variable is not None and otel_context._RUNTIME_CONTEXT is _RUNTIME:
            parent = variable.get()
        else:
            parent = otel_context.get_current()
    return Context({**parent, _KEY: span})


def attach(context: Context) -> Token[Context]:
    """``context.attach``: make ``context`` current in this task; the token undoes it."""
    variable = _VARIABLE
    if variable is not None and otel_context._RUNTIME_CONTEXT is _RUNTIME:
        return variable.set(context)
    return otel_context.attach(context)


def attach_held(holder: Any) -> Token[Context] | None:
    """``attach(holder.context)``, or nothing (None) when ``holder`` or its context is None: the
    ``on_enter`` of a flowing value that carries a context (flowra calls it around every step of
    every node, so ``attach`` is inlined here)."""
    if holder is None:
        return None
    context = holder.context
    if context is None:
        return None
    variable = _VARIABLE
    if variable is not None and otel_context._RUNTIME_CONTEXT is _RUNTIME:
        return variable.set(context)
    return otel_context.attach(context)


_INHERITED_TOKENS: ContextVar[bool] = ContextVar("flowra_otel_inherited_tokens", default=False)
"""True while ``inherited_tokens`` says a detach may meet a token of the task's creator."""


class inherited_tokens:  # noqa: N801 (a context manager, named for what it allows)
    """While this is entered, a token made in the context this task was copied from is not an
    error to ``detach``: there is nothing to undo in this task's copy, which dies with it.

    Why: flowra creates each step's task between entering and exiting the step's flowing values
    (in the engine's task), so the step's task inherits their tokens, already used. A run started
    inside that step (a tool calling ``runtime.run`` on the same runtime) replaces the flowing
    value at its root, and flowra then exits the inherited token in the step's task. Only that
    replacement is wrapped in this."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _INHERITED_TOKENS.set(True)

    def __exit__(self, *exc: object) -> None:
        _INHERITED_TOKENS.reset(self._token)


def detach(token: Token[Context]) -> None:
    """``context.detach``: never raises (a token of another context is logged, as the API does,
    unless ``inherited_tokens`` allows it)."""
    variable = _VARIABLE
    if variable is not None and otel_context._RUNTIME_CONTEXT is _RUNTIME:
        try:
            variable.reset(token)
        except (ValueError, RuntimeError):  # another context's token, or one already used
            if not _INHERITED_TOKENS.get():
                internal_error("flowra_otel: could not detach a context")
        except Exception:
            internal_error("flowra_otel: could not detach a context")
        return
    if _INHERITED_TOKENS.get():
        with contextlib.suppress(ValueError, RuntimeError):
            otel_context._RUNTIME_CONTEXT.detach(token)
        return
    otel_context.detach(token)


def uses_shortcut() -> bool:
    """Whether this process makes spans current without the API's call layers (for tests)."""
    return _KEY is not None and _VARIABLE is not None and otel_context._RUNTIME_CONTEXT is _RUNTIME


__all__ = ["attach", "attach_held", "context_with", "detach", "inherited_tokens", "uses_shortcut"]
