"""``RunState``: what every span of one flowra run shares, apart from where it sits in the tree.

Why apart from the router: the conversation id (stamped on every span once known), the user's
span attributes, the metric attributes taken from the spec's metadata, and the durable
trace link (the root span context kept in flowra's session storage, and the link a resumed run
starts with) are facts about the run, not about any one span.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.trace import Link, Span
from opentelemetry.util.types import AttributeValue

from . import attributes, durable_link, semconv
from .durable_link import LinkStore
from .safety import internal_error, safe_str
from .telemetry import Telemetry

logger = logging.getLogger("flowra_otel")


class RunState:
    """The facts one ``AgentRuntime.run``/``resume`` call shares across its spans."""

    __slots__ = (
        "conversation_id",
        "last_stamp",
        "link_store",
        "metric_extra",
        "persist_pending",
        "resumed_from",
        "root_span",
        "stamp_owner",
        "stamps",
        "user_id",
    )

    def __init__(self, *, link_store: LinkStore | None = None, resumed: Mapping[str, Any] | None = None) -> None:
        # per OtelHooks, conversation id and user id
        self.stamps: dict[tuple[int, str | None, str | None], attributes.Attributes] = {}
        self.metric_extra: dict[str, AttributeValue] = {}  # from the spec metadata, once accepted
        self.link_store = link_store  # a durable run's: where its trace link is kept
        self.persist_pending = False
        # The latest ``stamp()`` and whose it is: the book reads it inline for every chat and tool
        # span (one OtelHooks per run is the rule); dropped when the conversation id changes.
        self.stamp_owner: Telemetry | None = None
        self.last_stamp: attributes.Attributes = {}
        self.root_span: Span | None = None
        self.resumed_from = durable_link.parse_traceparent(resumed.get("traceparent")) if resumed else None
        self.conversation_id: str | None = (
            safe_str(resumed["conversation_id"]) if resumed and resumed.get("conversation_id") else None
        )
        # ``user.id``: the option, the spec metadata's ``user_id``, or what the run resumed kept
        self.user_id: str | None = safe_str(resumed["user_id"]) if resumed and resumed.get("user_id") else None

    def stamp(self, telemetry: Telemetry) -> attributes.Attributes:
        """Attributes every span of the run carries: the user's, the conversation id, ``user.id``."""
        options = telemetry.options
        if self.conversation_id is None and isinstance(options.conversation_id, str):
            self.conversation_id = options.conversation_id
        if self.user_id is None and isinstance(options.user_id, str):
            self.user_id = options.user_id
        cid, uid = self.conversation_id, self.user_id
        if cid is None and uid is None:
            stamp: attributes.Attributes = options.attributes  # type: ignore[assignment]
        else:
            key = (id(telemetry), cid, uid)
            cached = self.stamps.get(key)
            if cached is None:  # never mutated by the callers: they copy it into their own dicts
                cached = {**options.attributes}
                if cid is not None:
                    cached[semconv.GEN_AI_CONVERSATION_ID] = cid
                if uid is not None:
                    cached[semconv.USER_ID] = uid
                self.stamps[key] = cached
            stamp = cached
        self.stamp_owner, self.last_stamp = telemetry, stamp
        return stamp

    def accept_metadata(self, telemetry: Telemetry, metadata: Mapping[str, Any], open_spans: Iterable[Span]) -> None:
        """The spec's metadata is known (MessageAcceptedEvent): metric attributes, conversation id."""
        if telemetry.options.metric_metadata_keys:
            self.metric_extra.update(telemetry.options.metric_attributes_from(metadata))
        cid = telemetry.options.conversation_id_from(metadata) if self.conversation_id is None else None
        uid = telemetry.options.user_id_from(metadata) if self.user_id is None else None
        if not cid and not uid:
            return
        spans = list(open_spans)
        if cid:
            self.set_conversation_id(safe_str(cid), spans)
        if uid:
            self.user_id = safe_str(uid)
            self.stamp_owner = None  # the next stamp() carries it
            for span in spans:
                span.set_attribute(semconv.USER_ID, self.user_id)
            if self.link_store is not None:
                self.persist_pending = True  # a resume in another process keeps it

    def set_conversation_id(self, cid: str, open_spans: Iterable[Span]) -> None:
        """Known now: stamp it on every span already open in this run, and on all later ones."""
        self.conversation_id = cid
        self.stamp_owner = None  # the next stamp() carries it
        for span in open_spans:
            span.set_attribute(semconv.GEN_AI_CONVERSATION_ID, cid)
        if self.link_store is not None:
            self.persist_pending = True

    def root_links(self, attrs: attributes.Attributes) -> list[Link]:
        """A resumed run's root span links to the trace of the run it continues."""
        if self.resumed_from is None:
            return []
        attrs[durable_link.RESUMED] = True
        return [Link(self.resumed_from, {durable_link.LINK_TYPE: durable_link.LINK_RESUMED_FROM})]

    def root_started(self, span: Span) -> None:
        if self.root_span is None:
            self.root_span = span
            self.persist_pending = self.link_store is not None

    async def persist(self) -> None:
        """Keep this run's root span context (and conversation and user ids) in flowra's own
        session state, so a ``resume()`` in another process can link back to this trace."""
        self.persist_pending = False
        try:
            if self.link_store is not None and self.root_span is not None:
                await self.link_store.save(durable_link.link_state(self.root_span, self.conversation_id, self.user_id))
        except Exception:
            internal_error("flowra_otel: could not save the trace link in session storage")


__all__ = ["RunState"]
