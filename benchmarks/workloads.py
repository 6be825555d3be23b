"""The benchmark's workloads, as data: what the scripted model asks for, call by call.

A workload names its flowra line, its agent, the tool calls each LLM call of the agent asks for
(all at once: flowra runs them in parallel) before a last call that answers, and whether content
is captured. Each line's module (``modern_line.py``, ``old_line.py``) builds a real flowra runtime
from it: the real ``AgentRuntime`` and agent, a zero-latency scripted ``LLMProvider`` that answers
with usage, real tools, and the app's redaction hook when asked. Nothing here imports flowra or
``flowra_otel``: the driver reads the workloads without either.

The tools (each line builds those it supports):

* ``lookup_order`` a plain function; ``check_stock`` a coroutine (the app's hook rewrites its
  result, as a redaction hook would); ``ping`` a trivial function (the old line's);
* ``consult`` a custom agent used as a tool whose one step asks its own model through flowra's
  ``LLMCaller`` with its hooks (one more ``invoke_agent`` and ``chat``);
* ``research`` an agent used as a tool that runs its own tool loop (a ``TurnAgent`` that calls
  ``ping`` once, then answers: one more ``invoke_agent``, two ``chat`` and an ``execute_tool``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final, Literal

type Line = Literal["modern", "old"]
type Agent = Literal["chat", "turn", "tool_loop"]

TOOLS: Final = ("lookup_order", "check_stock", "ping", "consult", "research")


@dataclasses.dataclass(frozen=True)
class Call:
    """One LLM call of the agent that asks for tools: ``(tool, argument)`` pairs, all at once, and
    the text the model writes before them (None: none)."""

    tools: tuple[tuple[str, str], ...]
    text: str | None = None


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    line: Line
    title: str
    agent: Agent
    """``chat``: flowra's ``ChatAgent`` with a system prompt (its ``TurnAgent`` does the work);
    ``turn``: a bare ``TurnAgent``; ``tool_loop``: the old line's ``ToolLoopAgent``."""
    calls: tuple[Call, ...]
    """The agent's LLM calls that ask for tools, in order; one more call then answers."""
    content: bool
    """``capture_content`` of the plugin and of ``flowra.ext.otel`` (``content_off``: always off)."""
    hook: bool = False
    """The app's hook on ``AfterToolCallEvent`` that rewrites ``check_stock``'s result."""
    runs: tuple[int, int] = (3, 23)
    """LOW and HIGH runs per counted process (after the warm-up): the difference is HIGH - LOW runs."""

    def tool_calls(self) -> int:
        return sum(len(call.tools) for call in self.calls)

    def llm_calls(self) -> int:
        """The agent's own calls and those of its sub-agents (``consult`` one, ``research`` two)."""
        sub = {"consult": 1, "research": 2}
        return len(self.calls) + 1 + sum(sub.get(name, 0) for call in self.calls for name, _ in call.tools)

    def uses(self, tool: str) -> bool:
        return any(name == tool for call in self.calls for name, _ in call.tools)


SUPPORT_CALLS: Final = (
    Call(
        (
            ("lookup_order", "1042"),
            ("check_stock", "PART-7"),
            ("consult", "Where is parcel 00340434161234567890?"),
        ),
        text="Let me look at the order, the stock and ask logistics.",
    ),
    Call((("lookup_order", "1043"), ("check_stock", "PART-8"))),
    Call((("consult", "Can PART-8 ship today?"),)),
)


def support() -> Workload:
    """The support agent of issues 27 and 34: 6 LLM calls, 15 spans per run."""
    return Workload(
        name="support",
        line="modern",
        title="a support ChatAgent: 3 tools at once (one an agent with its own LLM call), 2 at once, the agent "
        "alone, the answer; an app hook; content on",
        agent="chat",
        calls=SUPPORT_CALLS,
        content=True,
        hook=True,
    )


def tool_loop(calls: int = 16, *, name: str | None = None) -> Workload:
    """A ``ChatAgent`` whose model asks for one tool per call, ``calls`` times, then answers; the
    tools alternate between ``lookup_order`` and ``check_stock`` (rewritten by the app's hook)."""
    script = tuple(
        Call(((("lookup_order", str(1000 + i)) if i % 2 == 0 else ("check_stock", f"PART-{i}")),)) for i in range(calls)
    )
    return Workload(
        name=name or f"tool_loop{calls}",
        line="modern",
        title=f"a ChatAgent tool loop: {calls} calls of one tool each, then the answer; an app hook; content on",
        agent="chat",
        calls=script,
        content=True,
        hook=True,
        runs=(3, 23) if calls <= 16 else (1, 4),
    )


def wide() -> Workload:
    """Many parallel tools and sub-agents: two calls of eight tools at once (two of them agents
    with their own LLM call, two agents with their own tool loop), then the answer."""
    batch = tuple(
        (tool, f"{tool}-{i}") for tool in ("lookup_order", "check_stock", "consult", "research") for i in range(2)
    )
    return Workload(
        name="wide",
        line="modern",
        title="a ChatAgent: twice 8 tools at once (2 functions, 2 coroutines, 2 agents with an LLM call, 2 agents "
        "with their own tool loop), the answer; an app hook; content on",
        agent="chat",
        calls=(Call(batch, text="Checking everything at once."), Call(batch)),
        content=True,
        hook=True,
        runs=(2, 12),
    )


def old_tool_loop(iterations: int = 20) -> Workload:
    """The old line's workload (flowra 0.0.8): ``ToolLoopAgent`` calls ``ping`` ``iterations``
    times, then answers; 42 spans and 86 metric records per run; content off (the default)."""
    return Workload(
        name="old_tool_loop",
        line="old",
        title=f"flowra 0.0.8 ToolLoopAgent: {iterations} calls of one trivial tool, then the answer; content off",
        agent="tool_loop",
        calls=tuple(Call((("ping", str(i)),)) for i in range(iterations)),
        content=False,
        runs=(4, 24),
    )


SHAPES: Final[dict[str, Callable[[], Workload]]] = {
    "support": support,
    "tool_loop": lambda: tool_loop(16, name="tool_loop"),
    "wide": wide,
}
"""The 0.0.93 shapes ``./dev bench-093`` counts, in order."""

PER_CALL: Final = (4, 64)
"""The two tool-loop lengths whose per-call overhead is compared (the ``per_call`` shape: ``--shapes per_call``)."""


def named(name: str) -> Workload:
    """A workload by the name the driver passes to its workers: a shape, ``old_tool_loop``, or
    ``tool_loopN`` (a tool loop of N calls)."""
    if name in SHAPES:
        return SHAPES[name]()
    if name == "old_tool_loop":
        return old_tool_loop()
    if name.startswith("tool_loop") and name[len("tool_loop") :].isdigit():
        return tool_loop(int(name[len("tool_loop") :]))
    msg = f"unknown workload {name!r} (known: {', '.join(SHAPES)}, old_tool_loop, tool_loopN)"
    raise ValueError(msg)


__all__ = ["PER_CALL", "SHAPES", "TOOLS", "Call", "Workload", "named"]
