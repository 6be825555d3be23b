"""The installed flowra line's scenarios, for the tests written once for both lines.

Each line's folder has a ``scenarios`` module (``tests/hook_registry/scenarios.py`` for flowra
0.0.3 - 0.0.8, ``tests/runtime_hooks/scenarios.py`` for 0.0.86 - 0.0.93) with the same names: the
scripted responses, the runs (a real agent, the plugin on its hooks) and the few facts that
differ between the lines. The tests in ``tests/both_lines/`` reach it only through ``S``, typed
by the ``Scenarios`` protocol below (each ``scenarios`` module checks itself against it, in that
line's mypy run). A difference between the lines stays explicit there: a constant
(``AGENT_PATH``, ``METADATA_EVENTS``...) or a release-aware skip, never a dropped assertion.
"""

from __future__ import annotations

import dataclasses
import importlib
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from flowra.llm import LLMProvider, Usage
from openai import AsyncOpenAI
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.adapters import flowra_version, line_of
from flowra_otel.core.content import MessageReader
from tests.conftest import SpanLedger

MakeHooks = Callable[..., OtelHooks]
type Step = Any
"""One scripted model call of the line's ``ScriptedProvider``: a response, an exception to raise,
or a function of the request."""
type ToolCall = tuple[str, str, dict[str, Any]]
"""``(call_id, tool_name, arguments)``."""
type ToolHook = Callable[[Any], None]
"""An app's ``BeforeToolCallEvent`` handler (it gets the ``Event``)."""
type HistoryEdit = Callable[[list[Any], int], None]
"""An app's hook on the messages the model is about to get (edited in place), and the call's index."""


@dataclasses.dataclass(frozen=True, slots=True)
class ToolRun:
    """What the model saw of a run's tool calls (the ``scenarios`` modules build it: defined
    before ``S`` is imported below)."""

    errors: list[bool]
    """Whether each tool result the model was given is an error, in order."""
    requests: list[list[Any]]
    """The messages of each request the model got, in order."""


class Scenarios(Protocol):
    """What each line's ``scenarios`` module provides (same names, same signatures)."""

    LINE: str
    AGENT_PATH: str
    """flowra's path of the agent named ``assistant`` (``flowra.agent.path`` on its ``invoke_agent`` span)."""
    RESEARCH_AGENT_PATHS: frozenset[str]
    """Every agent path of ``research_run`` (``AGENT_PATH`` among them)."""
    METADATA_EVENTS: int
    """How many of ``weather_turn_run``'s hook events carry the spec's metadata."""
    MESSAGES: MessageReader
    """What the line's adapter reads flowra messages with."""
    SSN: str
    CARD: str
    """The secrets in the records of ``card_on_file`` and ``lookup_customer``."""
    EXAMPLES: Path
    """The folder of this line's examples (``examples/`` or ``examples/hook_registry/``)."""
    EXAMPLES_SKIP: str | None
    """Why this release cannot run them (None: it can)."""
    HOOK_ORDERS: tuple[bool, ...]
    """The ``handlers_first`` values ``tool_hook_run`` is tested with on this line: the app's hooks
    after the plugin (False) and, on 0.0.3 - 0.0.8's ``HookRegistry``, before it too (True)."""

    def assert_all_ended(self, ledger: SpanLedger, exporter: InMemorySpanExporter) -> None:
        """Every started span ended once and was exported, and nothing of the run is still current."""
        ...

    # ------------------------------------------------------------------------------- responses
    def answer(self, text: str, *, usage: Usage | None = None) -> Step:
        """A final text answer (the line's default usage when ``usage`` is None)."""
        ...

    def tool_calls(self, *calls: ToolCall, text: str | None = None, usage: Usage | None = None) -> Step:
        """An assistant turn asking for ``calls`` (``text``: a preamble before them)."""
        ...

    def tool_result_block(self, tool_use_id: str, text: str) -> Any:
        """A ``ToolResultBlock`` holding ``text``."""
        ...

    def tool_result_text(self, block: Any) -> str:
        """The text a ``ToolResultBlock`` holds."""
        ...

    def note_tools(self, count: int, rng: random.Random | None = None) -> list[Any]:
        """``count`` tools ``tool_000``...: each answers with its ``note`` argument (its description
        8 sentences long, or a random 1 - 60 with ``rng``)."""
        ...

    def openai_provider(self, client: AsyncOpenAI) -> LLMProvider:
        """A flowra provider calling the real openai client's chat completions."""
        ...

    # ------------------------------------------------------------------------------------ runs
    async def weather_run(
        self, otel: OtelHooks, *steps: Step, text: str = ..., metadata: Mapping[str, Any] | None = None
    ) -> str | None:
        """The agent ``assistant`` with ``get_weather`` (a chat on 0.0.86+, a tool loop before)
        and ``otel`` on its hooks, answering ``text`` from ``steps``: its final text."""
        ...

    async def weather_turn_run(
        self, otel: OtelHooks, *steps: Step, text: str, metadata: Mapping[str, Any] | None = None
    ) -> str | None:
        """The same with the agent doing the work at the root (a bare ``TurnAgent`` on 0.0.86+)."""
        ...

    async def plain_run(self, otel: OtelHooks, *steps: Step, text: str) -> str | None:
        """The agent ``assistant`` without tools."""
        ...

    async def card_run(self, otel: OtelHooks, **metadata: Any) -> str | None:
        """``card_on_file`` (its result holds a card number) called once for Ada, then "Ok."."""
        ...

    async def customer_run(
        self, otel: OtelHooks, final: Step, *, mask: Callable[[str], str] | None, text: str = ...
    ) -> str | None:
        """``lookup_customer`` (its record holds an SSN and a card number) called for Ada, then
        ``final``; ``mask``: the app's own ``AfterToolCallEvent`` hook rewrites each tool result's
        text with it (registered after the plugin)."""
        ...

    async def research_run(self, otel: OtelHooks) -> str | None:
        """The assistant calls the ``research`` agent (an agent as a tool, with its own model:
        "Found it."), then answers "Because."."""
        ...

    async def tool_hook_run(
        self,
        otel: OtelHooks,
        *calls: ToolCall,
        handlers: Sequence[ToolHook] = (),
        handlers_first: bool = False,
        text: str = ...,
        final: str = ...,
    ) -> ToolRun:
        """The agent ``assistant`` with ``get_weather`` asked ``text``: the model makes ``calls``,
        then answers ``final`` (the run completes, every scripted response used); ``handlers``: the
        app's ``BeforeToolCallEvent`` hooks, registered after ``otel`` (before it with
        ``handlers_first``)."""
        ...

    async def budget_run(
        self, otel: OtelHooks, steps: Sequence[Step], offered: list[Any], text: str, prompt: str
    ) -> None:
        """The agent that does the work (tool loop / ``TurnAgent``), ``offered`` tools, up to 20 model calls."""
        ...

    async def provider_weather_run(
        self, provider: LLMProvider, otel: OtelHooks | None, *, model: str, after_install: Callable[[], None] = ...
    ) -> str | None:
        """``weather_run`` on a real provider: ``otel`` (if any) on the hooks, then ``after_install``."""
        ...

    async def history_edit_run(self, otel: OtelHooks, cities: Sequence[str], edit: HistoryEdit) -> list[list[Any]]:
        """The agent ``assistant`` with ``get_weather``: the model asks for each city's weather, one
        call at a time, then answers; right before every model call the app's hook hands the
        conversation the model is about to get to ``edit`` (in place: 0.0.3 - 0.0.8 a
        ``BeforeLLMCallEvent`` handler, 0.0.86+ an ``LLMCallSpan`` handler subscribed after the
        plugin, which flowra runs first). Returns a deep copy of the conversation each call got."""
        ...

    # -------------------------------------------------------------- a runtime kept between runs
    TELLS_A_RUN: bool
    """Whether the runtime shows a run in progress, so ``Installation.uninstall()`` refuses then
    (0.0.49 - 0.0.93)."""

    async def kept_runtime(self, *steps: Step) -> Any:
        """A runtime, with no ``OtelHooks`` on it, whose agent ``assistant`` (no tools) answers
        from ``steps``, one per run (a module-level runtime shared by tests, say)."""
        ...

    async def kept_run(self, runtime: Any) -> str | None:
        """One run of ``assistant`` on a ``kept_runtime``: its final text."""
        ...

    def on_message_accepted(self, runtime: Any, handler: Callable[[Any], None]) -> None:
        """The app's own hook on ``runtime``'s ``MessageAcceptedEvent`` (the plugin subscribes to it too)."""
        ...

    def handler_storage(self, runtime: Any) -> Any:
        """Where ``OtelHooks.install`` subscribes on ``runtime``, as flowra stores it (compared
        with ``==``): the global entries of ``runtime.hooks`` (0.0.47+: the scoped ones are
        flowra's agents' own), or the runtime's ``HookRegistry`` service and its handler lists."""
        ...


def _installed() -> Scenarios:
    line = line_of(flowra_version() or "")
    return cast(Scenarios, importlib.import_module(f"tests.{line}.scenarios"))


S = _installed()
"""The installed line's scenarios."""
