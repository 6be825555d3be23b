"""``ToolInvocation``: one ``execute_tool`` span, from a BeforeToolCallEvent to its AfterToolCallEvent.

Why an object per span: see ``chat_invocation``. A tool call is identified by the invocation
object itself (the router binds it to the tool-call node flowra spawns for it, by position),
never by the model's tool-use id, which models do not guarantee to be unique; the id is only
recorded data (``gen_ai.tool.call.id``).

Values are written only after every hook of the event ran: the arguments when BeforeToolCallEvent
returned (with the ledger of what hooks changed), the result when AfterToolCallEvent returned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from . import attributes, redaction, semconv
from .content import ContentRenderer
from .errors import end_error_type, record_end
from .mcp_invocation import call_error_type
from .safety import guarded, internal_error, safe_str
from .telemetry import Telemetry

logger = logging.getLogger("flowra_otel")

_MAX_SHAPES: Final = 256
_NO_ARGUMENTS: Final = object()
"""A tool use without ``input``: not a call at all (a hook's odd value), so no arguments."""


class ToolInvocation:
    """One tool call of one tool-loop iteration."""

    __slots__ = (
        "agent_name",
        "content",
        "description",
        "ended",
        "metric_extra",
        "model_name",
        "name",
        "redacted_fields",
        "run_name",
        "span",
        "start_ns",
        "telemetry",
        "tool_use",
        "unverified",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        parent: Context,
        model_tool_use: Any,
        tool_use: Any,
        *,
        agent_name: str,
        stamp: attributes.Attributes,
        start_ns: int,
        content: ContentRenderer | None,
        offered: Mapping[str, str] | None,
        metric_extra: Mapping[str, AttributeValue],
        shapes: dict[Any, tuple[str, attributes.Attributes]] | None = None,
        extra: attributes.Attributes | None = None,
    ) -> None:
        """``model_tool_use``: the call as the model asked for it; ``tool_use``: as every
        BeforeToolCallEvent hook left it, the call that runs. ``extra``: start attributes of this
        call alone (how it was answered: prefilled, cut off). ``offered``: the tools the agent's
        latest request offered (name -> description); None when not known yet (a call reopened by
        a resume, before its agent's first request in this process: ``offered_now``)."""
        self.telemetry = telemetry
        self.content = content  # None: no content is recorded on this span
        self.agent_name = agent_name
        self.metric_extra = metric_extra
        self.start_ns = start_ns
        self.tool_use = tool_use
        # The model chose ``model_name``; hooks may have changed it (``current``, the call that
        # runs). A name the request did not offer is model output, whoever passed it on: content
        # (and an unbounded metric series), so spans and metrics name a fixed placeholder instead.
        # Only an offered name is trusted, the model's or a hook's: a hook that merely normalises
        # names (strips a ``functions.`` prefix) must not make an invented name pass as a tool.
        # Plain ASCII strings (every tool use flowra makes) are taken as they are: no call each.
        model_name = getattr(model_tool_use, "name", "")
        self.model_name = model_name if type(model_name) is str and model_name.isascii() else safe_str(model_name)
        current = getattr(tool_use, "name", "")
        if type(current) is not str or not current.isascii():
            current = safe_str(current)
        # Not known yet: the placeholder until the agent's next request tells (``offered_now``).
        self.unverified = offered is None
        self.run_name = current
        offered_description = offered.get(current) if offered is not None else None
        self.name = current if offered_description is not None else semconv.INVENTED_TOOL_NAME
        self.description = offered_description or ""
        self.redacted_fields: list[str] = []
        self.ended = False
        requested = (
            content.text(self.model_name)
            if self.name == semconv.INVENTED_TOOL_NAME and content is not None and not self.unverified
            else None
        )
        key = (self.name, self.description, requested, id(stamp))
        shape = shapes.get(key) if shapes is not None else None
        if shape is None:
            template: attributes.Attributes = {
                semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
                semconv.GEN_AI_TOOL_NAME: self.name,
                semconv.GEN_AI_TOOL_TYPE: semconv.TOOL_TYPE_FUNCTION,
                semconv.GEN_AI_AGENT_NAME: agent_name,
                **stamp,
            }
            if self.description:
                template[semconv.GEN_AI_TOOL_DESCRIPTION] = self.description
            if requested is not None:
                template[semconv.FLOWRA_TOOL_REQUESTED_NAME] = requested
            shape = (f"{semconv.OP_EXECUTE_TOOL} {self.name}", template)
            if shapes is not None and len(shapes) < _MAX_SHAPES:
                shapes[key] = shape
        name, template = shape
        call_id = getattr(tool_use, "id", "")
        if type(call_id) is not str or not call_id.isascii():
            call_id = safe_str(call_id)
        attrs = {**template, semconv.GEN_AI_TOOL_CALL_ID: call_id}
        if extra:
            attrs.update(extra)
        self.span = telemetry.tracer.start_span(
            name, context=parent, kind=SpanKind.INTERNAL, attributes=attrs, start_time=start_ns
        )

    def offered_now(self, offered: Mapping[str, str]) -> None:
        """A call reopened by a resume learns the tools its agent offers (the agent's next
        request): a name offered there is the tool's own, and the span takes it (still open: it
        ends when its result is recorded); any other name keeps the placeholder."""
        if not self.unverified or self.ended:
            return
        self.unverified = False
        span = self.span
        description = offered.get(self.run_name)
        if description is None:  # invented by the model: its name is content
            if self.content is not None and span.is_recording():
                span.set_attribute(semconv.FLOWRA_TOOL_REQUESTED_NAME, self.content.text(self.model_name))
            return
        self.name = self.run_name
        self.description = description
        span.update_name(f"{semconv.OP_EXECUTE_TOOL} {self.name}")
        span.set_attribute(semconv.GEN_AI_TOOL_NAME, self.name)
        if description:
            span.set_attribute(semconv.GEN_AI_TOOL_DESCRIPTION, description)

    def called(self, change: redaction.FieldChange | None) -> None:
        """BeforeToolCallEvent returned: the ledger of what its hooks changed, and the arguments
        of the call that runs (content capture only). A hook may leave a value that is no call at
        all (flowra before 0.0.92 still spawns its tool-call agent): it has no arguments, so none are recorded
        (``None`` arguments of a call are recorded as ``null``)."""
        tool_use = self.tool_use
        if change is not None:
            self._record_ledger(change, tool_use)
        if self.content is not None and self.span.is_recording():
            arguments = getattr(tool_use, "input", _NO_ARGUMENTS)
            if arguments is not _NO_ARGUMENTS:
                rendered = self.content.tool_arguments(arguments)
                self.span.set_attribute(semconv.GEN_AI_TOOL_CALL_ARGUMENTS, rendered)
                if self.telemetry.options.openinference:
                    # Phoenix reads a tool's arguments into ``tool.parameters`` but fills its
                    # Input panel only from ``input.value``: the same rendered (post-hook) JSON
                    # (always JSON: text the model left is a JSON string there too)
                    self.span.set_attributes(
                        {semconv.OI_INPUT_VALUE: rendered, semconv.OI_INPUT_MIME_TYPE: semconv.MIME_JSON}
                    )

    def stop(
        self,
        result: Any,
        change: redaction.FieldChange | None,
        *,
        end_ns: int | None = None,
        error_kind: str | None = None,
    ) -> None:
        """Every hook has run: ``result`` is what the model sees. The span ends at ``end_ns``
        (default now): when the tool returned, if its result was recorded later. ``error_kind``:
        flowra's kind of a failed call (0.0.86+), recorded with the error."""
        if self.ended:
            return
        self.ended = True
        end_ns = end_ns or time.time_ns()
        error_type: str | None = None
        try:
            is_error = bool(getattr(result, "is_error", False))
            # an MCP call's own class (a JSON-RPC code, a transport failure) over the generic one
            error_type = (call_error_type(self.span) or semconv.ERROR_TYPE_TOOL) if is_error else None
            if change is not None:
                self._record_ledger(change, result)
            if is_error or self.content is not None:  # else the result leaves nothing on the span
                self._apply_result(result, is_error=is_error, error_kind=error_kind)
        except Exception:
            internal_error("flowra_otel: could not record a tool result; its span still ends")
        finally:
            self.span.end(end_time=end_ns)
        if self.telemetry.instruments.enabled:
            self._record_metrics(end_ns, error_type, result_error=error_type is not None)

    def fail(self, error: BaseException | None = None, *, reason: str | None = None, end_ns: int | None = None) -> None:
        """The call raised, or ends without a result because its agent or run does."""
        if self.ended:
            return
        self.ended = True
        end = end_ns or time.time_ns()
        error_type = end_error_type(error, reason)
        try:
            content = self.content
            record_end(self.span, error=error, reason=reason, render=content.text if content is not None else None)
        except Exception:
            internal_error("flowra_otel: could not record how a tool span ended; it still ends")
        finally:
            self.span.end(end_time=end)
        if self.telemetry.instruments.enabled:
            self._record_metrics(end, error_type)

    def _apply_result(self, result: Any, *, is_error: bool, error_kind: str | None = None) -> None:
        span = self.span
        if not span.is_recording():
            return
        content = self.content
        if is_error:
            span.set_attribute(semconv.ERROR_TYPE, call_error_type(span) or semconv.ERROR_TYPE_TOOL)
            span.set_attribute(semconv.FLOWRA_TOOL_IS_ERROR, True)
            if error_kind:
                span.set_attribute(semconv.FLOWRA_TOOL_ERROR_KIND, error_kind)
            # The result text is content: it goes in the description only when capture is on.
            span.set_status(Status(StatusCode.ERROR, content.result_text(result) if content is not None else None))
        elif content is not None:
            span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, content.tool_result(content.result_value(result)))

    def _record_ledger(self, change: redaction.FieldChange, final: Any) -> None:
        if not change.differs_from(final):
            return
        options = self.telemetry.options
        span = self.span
        self.redacted_fields.append(change.field)
        if span.is_recording():
            span.set_attribute(redaction.APPLIED, True)
            span.set_attribute(redaction.FIELDS, list(self.redacted_fields))
            span.set_attributes(change.attributes(final, options.redaction_hmac_key))
        if self.telemetry.instruments.enabled:
            guarded(self.telemetry.instruments.record_redaction, self.name, change.field, self.metric_extra)

    def _record_metrics(self, end_ns: int, error_type: str | None, *, result_error: bool = False) -> None:
        """The call's metric records, after its span ended. Never raises: a failed record is logged."""
        try:
            self.telemetry.instruments.record_tool(
                self.name,
                self.agent_name,
                self.metric_extra,
                duration_s=(end_ns - self.start_ns) / 1e9,
                error_type=error_type,
                result_error=result_error,
            )
        except Exception:
            internal_error("flowra_otel: could not record the metrics of a tool span")
