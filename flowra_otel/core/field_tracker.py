"""The redaction ledger's view of one event: which handler changed a tool field, and how.

Why: the ledger names the hook that replaced ``BeforeToolCallEvent.tool_use`` or
``AfterToolCallEvent.result`` (or edited the tool arguments in place). flowra's own emit gives no
per-handler view on either API line; each adapter runs flowra's handler loop itself and calls
``FieldTracker.after`` after each handler other than its own (which never changes an event): one
identity check, and for tool arguments (a mutable dict) a comparison of their canonical text, so
an in-place edit counts. (0.0.3 - 0.0.8: a ``propagate_to`` forwarder's nested emit runs through
the same loop and updates the tracker first, so the forwarder itself is never blamed for a change
made by a handler of the target registry.)
"""

from __future__ import annotations

import logging
from typing import Any

from . import redaction
from .safety import changed, internal_error

logger = logging.getLogger("flowra_otel")


class FieldTracker:
    """The tracked field of one event object across every handler of its (outermost) emit."""

    __slots__ = ("change", "field", "initial", "last", "text")

    def __init__(self, field: str, value: Any) -> None:
        self.field = field
        self.initial = value  # before any handler: e.g. the tool-use block of the model's response
        self.last = value  # the field's value after the latest handler
        self.change: redaction.FieldChange | None = None
        # Tool arguments only (a tool input is a mutable dict; blocks and result text are not):
        # the canonical text after the latest handler, so an in-place edit is seen too.
        self.text: str | None = None

    @property
    def ledger_field(self) -> str:
        return redaction.FIELD_ARGUMENTS if self.field == "tool_use" else redaction.FIELD_RESULT

    def start(self) -> None:
        """Before the first handler of a tracked emit: take the arguments' text, if not yet taken."""
        if self.field == "tool_use" and self.text is None:
            self.text = redaction.canonical(redaction.FIELD_ARGUMENTS, self.last)

    def observe(self, value: Any, handler: Any) -> None:
        """Called when ``value`` is not the last value seen (identity): equality decides."""
        if not changed(value, self.last):
            return
        self._note(handler, self.text)
        self.last = value
        if self.text is not None:
            self.text = redaction.canonical(redaction.FIELD_ARGUMENTS, value)

    def after(self, value: Any, handler: Any) -> None:
        """After ``handler`` ran: note whether it replaced the field, or edited it in place."""
        try:
            if value is not self.last:
                self.observe(value, handler)
            elif self.text is not None:
                self.check_in_place(value, handler)
        except Exception:  # the ledger loses an entry; the agent never notices
            internal_error("flowra_otel: could not note a hook's change for the redaction ledger")
            self.last = value

    def check_in_place(self, value: Any, handler: Any) -> None:
        """The same object as before ``handler``: did it edit the arguments in place?"""
        before = self.text
        if before is None:
            return
        after = redaction.canonical(redaction.FIELD_ARGUMENTS, value)
        if after != before:
            self._note(handler, before)
            self.text = after

    def _note(self, handler: Any, original_text: str | None) -> None:
        if self.change is None:
            self.change = redaction.FieldChange(self.ledger_field, self.last, original_text)
        self.change.handlers.append(redaction.handler_name(handler))
