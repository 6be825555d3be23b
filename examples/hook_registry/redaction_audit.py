"""Content capture with a redaction hook, proven by auditing the exported trace.

    .venv-flowra-0.0.8/bin/python examples/hook_registry/redaction_audit.py

(``./dev pytest-on 0.0.8`` builds ``.venv-flowra-0.0.8``; any Python >= 3.12 environment with flowra
0.0.3 - 0.0.8 and this package installed works too. The ``python3`` on many machines is older and
has no flowra: plain ``python ...`` fails there.)

A ``lookup_customer`` tool returns a record holding an API key and an e-mail address. With
content capture on (``OtelHooks(capture_content=True)``), tool results and messages are recorded
on spans, so a flowra hook on ``AfterToolCallEvent`` scrubs the result first. The plugin records
every value *after* all hooks have run, and writes a redaction ledger on the ``execute_tool``
span: which hook changed the result and how long it was before and after, never the original.

The example runs the agent twice, with the hook and "forgetting" it. Each run's spans go to a
traces file (``configure_telemetry(traces_file=...)``, or ``FLOWRA_OTEL_TRACES_FILE`` in the
environment: OTLP JSON lines, as the OpenTelemetry Collector's ``file`` exporter writes them),
which is then audited, as ``flowra-otel audit`` does from the command line::

    flowra-otel audit spans.jsonl [--secret TEXT ...] [--json]

The first audit lists the tool call with its ledger and finds nothing (exit 0); the second
finds the key and the e-mail address on the tool span and on the next LLM call's input (exit 1).
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path

from flowra.agent import Event, HookRegistry
from flowra.lib import LLMConfig
from flowra.lib.tool_loop import AfterToolCallEvent, ToolLoopAgent, ToolLoopConfig, ToolLoopSpec
from flowra.llm import AssistantMessage, LLMProvider, LLMRequest, LLMResponse, StopReason, TextBlock, ToolUseBlock
from flowra.runtime import AgentRuntime
from flowra.tools import ToolRegistry, get_local_tool, tool

from flowra_otel import OtelHooks
from flowra_otel.core.audit import audit_file, render_text
from flowra_otel.export import configure_telemetry
from flowra_otel.redaction import map_result_text

API_KEY = "sk-proj-" + "Zx81Qa" * 5
EMAIL = "alice@example.com"


# --------------------------------------------------------------------------------- a scripted LLM
class ScriptedLLM(LLMProvider):
    """Asks for the customer record, then answers; no network, same output every run."""

    def __init__(self, responses: Sequence[LLMResponse]) -> None:
        self._responses = list(responses)

    async def call(self, request: LLMRequest) -> LLMResponse:
        return self._responses.pop(0)


def script() -> list[LLMResponse]:
    return [
        LLMResponse(
            message=AssistantMessage(
                blocks=[ToolUseBlock(id="call_1", name="lookup_customer", input={"name": "Alice"})]
            ),
            stop_reason=StopReason.TOOL_USE,
        ),
        LLMResponse(
            message=AssistantMessage(blocks=[TextBlock(text="Alice is on the Pro plan.")]),
            stop_reason=StopReason.END_TURN,
        ),
    ]


# --------------------------------------------------------------------------------- tool and hook
@dataclasses.dataclass(frozen=True, slots=True)
class CustomerQuery:
    name: str


@tool("lookup_customer", "Look up a customer record by name.")
async def lookup_customer(params: CustomerQuery) -> str:
    return f"name={params.name}; plan=pro; email={EMAIL}; api_key={API_KEY}"


def scrub_customer_record(event: Event[AfterToolCallEvent]) -> None:
    """The application's redaction hook: no key or address leaves a tool result
    (``map_result_text``: the same hook as examples/redaction_audit.py's, on every release)."""
    event.data.result = map_result_text(
        event.data.result, lambda text: text.replace(API_KEY, "[api key removed]").replace(EMAIL, "[email removed]")
    )


# --------------------------------------------------------------------------------- one run
async def run_agent(traces_file: Path, *, redact: bool) -> None:
    """One run of the agent, its spans appended to ``traces_file``."""
    telemetry = configure_telemetry(
        service_name="redaction-audit-example", traces_file=traces_file, set_global=False, register_atexit=False
    )
    hooks = HookRegistry()
    hooks.add(
        OtelHooks(
            tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider, capture_content=True
        )
    )
    if redact:
        hooks.on(AfterToolCallEvent, scrub_customer_record)

    async with await ToolRegistry.create([get_local_tool(lookup_customer)]) as tools:
        runtime = AgentRuntime(
            agents={"assistant": ToolLoopAgent},
            services={
                LLMProvider: ScriptedLLM(script()),
                ToolRegistry: tools,
                ToolLoopConfig: ToolLoopConfig(llm_config=LLMConfig(model="openai/gpt-4o"), session_messages=[]),
                HookRegistry: hooks,
            },
        )
        await runtime.run(agent="assistant", spec=ToolLoopSpec(user_message="Which plan is Alice on?"))
    telemetry.shutdown()  # writes what the batch processor still holds, and closes the file


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="flowra-otel-audit-") as tmp:
        for redact in (True, False):
            title = "with the redaction hook" if redact else "without it (a planted leak)"
            path = Path(tmp) / ("redacted.jsonl" if redact else "leaky.jsonl")
            await run_agent(path, redact=redact)
            report = audit_file(path)  # the built-in secret patterns; add secrets=[...] for exact strings
            print(f"=== audit {title}: exit status {report.exit_code}")
            print(render_text(report).replace(str(path), path.name))


if __name__ == "__main__":
    asyncio.run(main())
