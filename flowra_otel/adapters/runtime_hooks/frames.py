"""What follows flowra's execution tree: ``Frame`` (the flowing value), ``AgentScope``, ``RunScope``.

Why a flowing value: flowra (0.0.47+) runs every step of every node in a task of its own and gives
span handlers no node id, but its ``FlowingRegistry`` carries a value down the execution tree
(snapshotted per node, applied around each step and each child's creation). The adapter keeps one
``Frame`` there: the OpenTelemetry context children parent under (made current for the node's
steps by the variable's enter/exit callbacks, which flowra calls in one task), the nearest traced
agent (whose events a step emits) and the run. A frame is marked closed when its span ends, so a
node that outlives it (``GotoAgent`` replaces an agent on the same node) parents under the nearest
open one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry.context import Context

from ...core import attributes, current_span
from ...core.agent_invocation import AgentInvocation
from ...core.content import ContentRenderer
from ...core.redaction import FieldChange
from ...core.run_state import RunState
from ...core.safety import safe_str
from ...core.tool_invocation import ToolInvocation
from ._flowra import ToolResultBlock, UserMessage


class RunScope:
    """One ``AgentRuntime.run`` / ``resume`` call, as far as this adapter traces it."""

    __slots__ = ("caller", "content", "resume_frames", "state")

    def __init__(self, state: RunState, *, content: bool) -> None:
        self.state = state
        self.content = content  # False: the run was started by a hook, its content is withheld
        self.caller: Context | None = None  # the context current when the run's root opened
        # A resume opens the tree's spans outside their parents' flowing values, depth first:
        # the frame opened last at each depth is the parent of the next node one level down.
        self.resume_frames: list[Frame | None] = []

    def resumed_parent(self, depth: int) -> Frame | None:
        frames = self.resume_frames
        return frames[depth - 1] if 0 < depth <= len(frames) else None

    def resumed_at(self, depth: int, frame: Frame | None) -> None:
        frames = self.resume_frames
        del frames[depth:]
        while len(frames) < depth:
            frames.append(None)
        frames.append(frame)


@dataclasses.dataclass(slots=True)
class PendingResult:
    """A tool call whose result every hook has seen, waiting for the value the model is given
    (flowra may still change it: ``max_consecutive_errors``, ``additional_blocks``)."""

    call_id: str
    tool: ToolInvocation
    result: Any
    change: FieldChange | None
    end_ns: int
    error_kind: str | None = None


class AgentScope:
    """One traced agent: its ``AgentInvocation`` and what its turn's events leave for later."""

    __slots__ = (
        "announced",
        "awaiting",
        "calls_ns",
        "ended_tools",
        "invocation",
        "prefilled",
        "run",
        "running",
        "withhold_output",
    )

    def __init__(self, invocation: AgentInvocation, run: RunScope) -> None:
        self.invocation = invocation
        self.run = run
        # Keyed by call id, a list each: a model may give several calls one id (or none, "").
        # BeforeToolCallEvent, after its hooks: (the call as the model made it, the ledger, the call that runs).
        self.announced: dict[str, list[tuple[Any, FieldChange | None, Any]]] = {}
        self.running: dict[str, list[ToolInvocation]] = {}  # execute_tool spans, until AfterToolCallEvent
        self.ended_tools: dict[ToolInvocation, int] = {}  # when each call's tool returned
        self.awaiting: list[PendingResult] = []
        self.calls_ns = 0  # when the latest BeforeToolCallsEvent was emitted (a prefilled call's start)
        self.prefilled: set[str] = set()
        self.withhold_output = False  # a BeforeToolCallEvent hook raised: the chat's output is withheld

    @property
    def content(self) -> ContentRenderer | None:
        return self.invocation.content

    def settle(self, messages: Iterable[Any] | None, tools: Any = None) -> None:
        """Record each awaiting result as ``messages`` (a request's, or the turn's) give it to the
        model; a result not found there is recorded as every hook left it. ``tools``: the
        request's, which name the calls a resume reopened before any request was seen."""
        awaiting, self.awaiting = self.awaiting, []
        if not awaiting:
            return
        given = results_by_id(messages, {p.call_id for p in awaiting}) if messages is not None else {}
        offered = (
            attributes.tool_descriptions(tools)
            if tools is not None and any(p.tool.unverified for p in awaiting)
            else None
        )
        for pending in awaiting:
            if offered is not None:
                pending.tool.offered_now(offered)
            results = given.get(pending.call_id)  # the calls sharing an id get their results in order
            result = results.pop(0) if results else pending.result
            pending.tool.stop(result, pending.change, end_ns=pending.end_ns, error_kind=pending.error_kind)


@dataclasses.dataclass(slots=True)
class Frame:
    """The value flowra carries down the execution tree for this adapter."""

    context: Context | None
    """Made current while the node's steps run (its span; None: nothing to attach)."""
    run: RunScope
    agent: AgentScope | None = None
    """The agent whose events this node's steps emit (None: a tool call's own frame, or a run
    whose root flowra handles itself, such as a ``ChatAgent``)."""
    tool: ToolInvocation | None = None
    """The tool call this frame is (its children are an agent used as a tool)."""
    parent: Frame | None = None
    closed: bool = False


def nearest_open(frame: Frame | None) -> Frame | None:
    while frame is not None and frame.closed:
        frame = frame.parent
    return frame


enter: Callable[[Frame | None], Token[Context] | None] = current_span.attach_held
"""``FlowingVar`` ``on_enter``: make the frame's context current (flowra calls this and ``exit_``
in the engine's task, around each step's creation, so attach and detach pair up)."""

exit_: Callable[[Token[Context]], None] = current_span.detach
"""``FlowingVar`` ``on_exit``: undo ``enter`` (never raises)."""


RESUMING: ContextVar[RunScope | None] = ContextVar("flowra_otel_resuming", default=None)
"""The run whose spans ``AgentRuntime.resume`` is reopening in this task (set by its root)."""


def results_by_id(messages: Iterable[Any], wanted: set[str]) -> dict[str, list[Any]]:
    """The ``ToolResultBlock``s for each wanted call id (in message order: calls sharing an id
    are answered in the order they were made), newest messages first (results follow the message
    that made the calls, so the search stops as soon as all are found)."""
    found: dict[str, list[Any]] = {}
    for message in reversed(list(messages)):
        if not isinstance(message, UserMessage):
            continue
        here: dict[str, list[Any]] = {}
        for block in message.blocks:
            if not isinstance(block, ToolResultBlock):
                continue
            ident = block.tool_use_id
            key = ident if type(ident) is str else safe_str(ident)  # as the call ids are kept
            if key in wanted and key not in found:
                here.setdefault(key, []).append(block)
        found.update(here)
        if len(found) == len(wanted):
            break
    return found


def take[T](entries: dict[str, list[T]], call_id: str, match: Callable[[T], bool]) -> T | None:
    """Remove and return the entry of ``call_id`` that ``match``es, else its oldest (calls that
    share an id run in the order they were made), or None."""
    items = entries.get(call_id)
    if not items:
        return None
    # one entry (the usual case): it is the one, whether it matches or not
    index = next((i for i, item in enumerate(items) if match(item)), 0) if len(items) > 1 else 0
    item = items.pop(index)
    if not items:
        del entries[call_id]
    return item
