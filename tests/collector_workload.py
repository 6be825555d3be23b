"""The agent runs the collector and Jaeger end-to-end tests send, on whichever flowra line is
installed: ``tests/runtime_hooks/collector_workload.py`` (flowra 0.0.56 - 0.0.93) or
``tests/hook_registry/collector_workload.py`` (0.0.3 - 0.0.8), both real multi-agent runs (an
agent used as a tool) through flowra's ``AgentRuntime`` with a scripted model, traced by
``OtelHooks`` on the tracer provider a test gives them.

The line's module is imported by name at run time (``load``): a static import would make each
line's mypy run analyse the other line's flowra API.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Final, Protocol, cast

from opentelemetry.sdk.trace import TracerProvider

from flowra_otel.adapters import flowra_version, line_of

CONTENT_KEYS: Final = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
)
"""The GenAI content attributes (the workloads capture content: every one is exported)."""
OPENINFERENCE_CONTENT_KEYS: Final = frozenset({"input.value", "output.value"})
"""OpenInference's copies of content, which ``openinference=True`` adds (the Collector tests' multi-agent
runs turn it on)."""
GUARDED_KEYS: Final = CONTENT_KEYS | OPENINFERENCE_CONTENT_KEYS
"""What ``collector-config.yaml``'s ``attributes/redaction`` guard deletes (a test reads the
config and checks it is exactly this set)."""


class Workload(Protocol):
    """What a line's ``collector_workload`` module provides."""

    LINE: str
    HAS_LINKS: bool
    """Whether ``linked_run`` exists on this line (a durable run resumed in a new trace)."""
    SECRETS: tuple[str, ...]
    """Values a redaction hook removes from tool results before anything records them."""
    CONTENT_MARKERS: tuple[str, ...]
    """Texts of the ``multi_agent_run`` that live only in content attributes (the question, the
    answers, the tool results): with capture on they are exported, and the guard must remove them."""
    MULTI_AGENT_SPANS: int
    """Spans of one ``multi_agent_run``."""

    async def multi_agent_run(
        self, tracer_provider: TracerProvider, conversation_id: str, *, openinference: bool = False
    ) -> None:
        """An assistant that calls a research agent as a tool (whose own tools include one that
        raises and one whose secret a redaction hook masks) and a plain tool; capture on, and the
        OpenInference copies of content with ``openinference``."""

    async def linked_run(self, tracer_provider: TracerProvider, workdir: Path) -> None:
        """A durable multi-agent run that died in its sub-agent, resumed: its root span links to
        the dead run's trace (capture on). Only when ``HAS_LINKS``."""

    async def outcome_run(self, tracer_provider: TracerProvider, index: int, *, fail: bool) -> bool:
        """A small multi-agent run (research agent as a tool, capture off, no redaction). With
        ``fail`` something in it fails: a provider error that fails the whole run (even
        ``index``) or a tool that raises (odd ``index``). True when the run itself raised."""


def line() -> str:
    name = line_of(flowra_version() or "")
    assert name is not None, f"no flowra line for the installed flowra {flowra_version()}"
    return name


def load() -> Workload:
    return cast("Workload", importlib.import_module(f"tests.{line()}.collector_workload"))
