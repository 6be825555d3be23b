"""The benchmark's workload on flowra 0.0.3 - 0.0.8 (``HookRegistry``), and its hook points there.

``build`` makes a ``workloads.Workload`` of this line a real runtime: flowra's ``AgentRuntime`` and
``ToolLoopAgent``, a zero-latency scripted provider that asks for the workload's tool calls one
LLM call after the other and then answers (every response with usage), and ``ping``, the one
tool this line's workload uses. ``install_plugin`` adds an ``OtelHooks`` to the runtime's
``HookRegistry`` as an app does; the hook points of the exact floor (``replay``) are the tool
loop's events, noted by a marker put first on the registry (streaming deltas left out: a
handler for them switches flowra's tool loop to streaming).

Self-contained (nothing from ``tests/``); ``flowra_otel`` is imported only by ``install_plugin``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

from flowra.agent import Event, HookRegistry
from flowra.lib import LLMConfig
from flowra.lib.tool_loop import ToolLoopAgent, ToolLoopConfig, ToolLoopResult, ToolLoopSpec, hook_events
from flowra.llm import (
    AssistantMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from flowra.runtime import AgentRuntime
from flowra.tools import ToolRegistry, get_local_tool, tool
from opentelemetry import metrics, trace
from replay import EVENT, Floor, Note
from workloads import Workload

NAME: Final = "old"
MODEL = "anthropic/sonnet-4-5"
USER_MESSAGE = "Ping the service 20 times, then say done."
AGENT = "assistant"

EVENT_TYPES: Final[dict[str, type[Any]]] = {
    name: getattr(hook_events, name) for name in hook_events.__all__ if not name.endswith("DeltaEvent")
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class PingInput:
    seq: int = 0


@tool("ping", "Answer pong. The benchmark's trivial tool.")
def ping(params: PingInput) -> str:
    return "pong"


class ScriptedToolLoopProvider(LLMProvider):
    """Zero latency: call ``k`` (``k`` assistant messages in the request) asks for the script's
    call ``k``, then answers. The responses are built once."""

    __slots__ = ("_final", "_tool_calls")

    def __init__(self, workload: Workload) -> None:
        usage = Usage(input_tokens=120, output_tokens=18)
        self._tool_calls = [
            LLMResponse(
                message=AssistantMessage(
                    blocks=[
                        ToolUseBlock(id=f"call_{k}_{j}", name=name, input={"seq": int(argument)})
                        for j, (name, argument) in enumerate(call.tools)
                    ]
                ),
                stop_reason=StopReason.TOOL_USE,
                usage=usage,
            )
            for k, call in enumerate(workload.calls)
        ]
        self._final = LLMResponse(
            message=AssistantMessage(blocks=[TextBlock(text="done")]), stop_reason=StopReason.END_TURN, usage=usage
        )

    async def call(self, request: LLMRequest) -> LLMResponse:
        done = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return self._tool_calls[done] if done < len(self._tool_calls) else self._final


class Bench:
    """One workload made a runtime: ``run()`` is one run, ``check()`` one run that must be the
    workload described (else it raises)."""

    def __init__(self, workload: Workload, registry: HookRegistry, runtime: AgentRuntime) -> None:
        self.workload = workload
        self.registry = registry
        self.runtime = runtime
        self.begin: Callable[[], None] | None = None  # the floor's per-run set-up

    async def run(self) -> object:
        if self.begin is not None:
            self.begin()
        return await self.runtime.run(agent=AGENT, spec=ToolLoopSpec(user_message=USER_MESSAGE))

    async def check(self) -> None:
        result = await self.run()
        if not isinstance(result, ToolLoopResult):
            raise RuntimeError(f"expected a ToolLoopResult, got {result!r}")
        status = str(getattr(result.status, "value", result.status))
        results = sum(1 for m in result.messages for b in m.blocks if type(b).__name__ == "ToolResultBlock")
        errors = sum(1 for m in result.messages for b in m.blocks if getattr(b, "is_error", False))
        if status != "completed" or results != self.workload.tool_calls() or errors:
            raise RuntimeError(f"bad workload run: status={status} tool_results={results} errors={errors}")


async def build(workload: Workload) -> Bench:
    if workload.agent != "tool_loop" or not all(name == "ping" for c in workload.calls for name, _ in c.tools):
        raise ValueError(f"{workload.name}: flowra 0.0.3 - 0.0.8 runs the ToolLoopAgent with ping only")
    registry = HookRegistry()
    tools = await ToolRegistry.create([get_local_tool(ping)])
    config = ToolLoopConfig(
        llm_config=LLMConfig(model=MODEL), session_messages=[], max_llm_calls=len(workload.calls) + 5
    )
    runtime = AgentRuntime(
        agents={AGENT: ToolLoopAgent},
        services={
            LLMProvider: ScriptedToolLoopProvider(workload),
            ToolRegistry: tools,
            ToolLoopConfig: config,
            HookRegistry: registry,
        },
    )
    return Bench(workload, registry, runtime)


def install_plugin(
    bench: Bench, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider, **options: Any
) -> None:
    """``hooks.add(OtelHooks(...))`` on the registry the agents get: the plugin as an app sets it up."""
    from flowra_otel import OtelHooks

    bench.registry.add(OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider, **options))


def install_ext_otel(bench: Bench, tracer_provider: trace.TracerProvider, *, content: bool) -> None:
    raise ValueError("flowra.ext.otel ships with flowra 0.0.9+, not on this line")


def subscribe_markers(bench: Bench, note: Note, *, before: bool) -> None:
    """A marker first on the registry for every event (before every other handler acts)."""
    if not before:
        return
    for name, event_type in EVENT_TYPES.items():

        def on_event(event: Event[Any], name: str = name) -> None:
            note(EVENT, name, None)

        bench.registry.on(event_type, on_event, prepend=True)


def subscribe_floor(bench: Bench, floor: Floor) -> None:
    for _, name in sorted(floor.plan.subscribed()):
        bench.registry.on(EVENT_TYPES[name], floor.step)
    bench.begin = Floor.begin_run


__all__ = ["NAME", "Bench", "build", "install_ext_otel", "install_plugin", "subscribe_floor", "subscribe_markers"]
