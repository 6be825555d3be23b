"""flowra 0.0.56 - 0.0.93 runs for the collector and Jaeger end-to-end tests (the interface is
``tests.collector_workload.Workload``): real agents, a research agent used as a tool, a scripted
model, ``OtelHooks`` on the tracer provider the test passes."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Final

from flowra.agent import Event
from flowra.lib.turn.hook_events import AfterToolCallEvent
from flowra.llm import TextBlock
from opentelemetry.sdk.trace import TracerProvider

from flowra_otel import OtelHooks
from tests.runtime_hooks.support import (
    CARD,
    SSN,
    ScriptedProvider,
    explode,
    get_weather,
    lookup_customer,
    research_runtime,
    run_chat,
    text_response,
    tool_calls_response,
)
from tests.runtime_hooks.test_durable_resume import durable_runtime

LINE: Final = "runtime_hooks"
HAS_LINKS: Final = True
SECRETS: Final = (SSN, CARD)
QUESTION: Final = "Which ledger did Zanzibar Trading file last quarter?"
RESEARCH_QUESTION: Final = "Find the Zanzibar Trading ledger and its owner"
RESEARCH_ANSWER: Final = "The ledger of Ada Quillfeather, filed in Stone Town."
FINAL_ANSWER: Final = "Zanzibar Trading filed the Quillfeather ledger; Paris is sunny."
CONTENT_MARKERS: Final = (QUESTION, RESEARCH_QUESTION, RESEARCH_ANSWER, FINAL_ANSWER, "Quillfeather", "Sunny in Paris")
MULTI_AGENT_SPANS: Final = 11
"""invoke_agent assistant; its 2 chats, execute_tool research and get_weather; under research:
invoke_agent researcher, invoke_agent researcher/turn, its 2 chats, lookup_customer, explode."""
REPO: Final = Path(__file__).resolve().parents[2]


def mask_secrets(event: Event[AfterToolCallEvent]) -> None:
    """The app's redaction hook: no SSN or card number leaves a tool result."""
    result = event.data.result
    blocks = [
        dataclasses.replace(b, text=b.text.replace(SSN, "[SSN]").replace(CARD, "[CARD]"))
        if isinstance(b, TextBlock)
        else b
        for b in result.content
    ]
    event.data.result = dataclasses.replace(result, content=blocks)


async def multi_agent_run(
    tracer_provider: TracerProvider, conversation_id: str, *, redact: bool = True, openinference: bool = False
) -> None:
    main = ScriptedProvider(
        tool_calls_response(
            ("r1", "research", {"question": RESEARCH_QUESTION}), ("w1", "get_weather", {"city": "Paris"})
        ),
        text_response(FINAL_ANSWER, tokens=(95, 17)),
    )
    researcher = ScriptedProvider(
        tool_calls_response(("c1", "lookup_customer", {"name": "Ada"}), ("e1", "explode", {"city": "Rome"})),
        text_response(RESEARCH_ANSWER, tokens=(40, 6)),
    )
    runtime = research_runtime(main, researcher, lookup_customer, explode)
    OtelHooks(tracer_provider=tracer_provider, capture_content=True, openinference=openinference).install(runtime)
    if redact:
        runtime.hooks.on(AfterToolCallEvent, mask_secrets)
    result = await run_chat(runtime, QUESTION, conversation_id=conversation_id)
    assert result.response == FINAL_ANSWER
    assert not main.script and not researcher.script


def _die_in_the_sub_agent(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.runtime_hooks.test_durable_resume", "sub_agent", str(workdir)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith('{"event": "dying"}'), proc.stdout + proc.stderr


class ProviderDownError(RuntimeError):
    """What the failing runs' model raises on its second call."""


async def linked_run(tracer_provider: TracerProvider, workdir: Path) -> None:
    """``tests.runtime_hooks.test_durable_resume``'s sub-agent crash (a process that dies in the
    researcher's tool), resumed here; the assistant's model then fails, so the run ends in an
    error (which is what keeps it through the tail sampler)."""
    await asyncio.to_thread(_die_in_the_sub_agent, workdir)
    runtime = durable_runtime(
        str(workdir),
        sub_agent=True,
        crash=False,
        main=[ProviderDownError("model unavailable")],
        researcher=[text_response("Because.")],
    )
    OtelHooks(tracer_provider=tracer_provider, capture_content=True).install(runtime)
    try:
        result = await runtime.resume()
    except ProviderDownError:
        return
    raise AssertionError(f"the resumed run was to fail, got {result!r}")


async def outcome_run(tracer_provider: TracerProvider, index: int, *, fail: bool) -> bool:
    provider_fails = fail and index % 2 == 0
    tool_fails = fail and not provider_fails
    researcher_tools = (explode,) if tool_fails else (get_weather,)
    research_calls = [("e1", "explode", {"city": "Rome"})] if tool_fails else [("w1", "get_weather", {"city": "Rome"})]
    main = ScriptedProvider(
        tool_calls_response(("r1", "research", {"question": f"question {index}"})),
        ProviderDownError("model unavailable") if provider_fails else text_response(f"answer {index}"),
    )
    researcher = ScriptedProvider(tool_calls_response(*research_calls), text_response(f"research {index}"))
    runtime = research_runtime(main, researcher, *researcher_tools)
    OtelHooks(tracer_provider=tracer_provider).install(runtime)
    try:
        await run_chat(runtime, f"run {index}", conversation_id=f"run-{index}")
    except ProviderDownError:
        return True
    return False
