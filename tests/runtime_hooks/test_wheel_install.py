"""The package as a user on today's flowra gets it: the wheel installed next to the app's flowra.

Installing must leave the app's flowra exactly as it was (the package declares no upper bound;
an older release of this package downgraded 0.0.93 to 0.0.8), and an unsupported flowra must
get a clear error naming the supported releases when tracing is set up, never a downgrade and
never a silent no-op.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime_hooks.support import APP_DIALECT
from tests.wheel import EDGE_RELEASES, FLOWRA, Installed, install, installed_flowra, run

APP = """
import asyncio, json
import flowra_otel
from flowra.agent import AgentRuntime
from flowra.lib.chat import ChatAgent, ChatConfig
from flowra.llm import AssistantMessage, LLMProvider, LLMResponse, StopReason, SystemMessage, TextBlock, Usage
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry
APP_DIALECT


class CannedLLM(LLMProvider):
    async def call(self, request):
        return LLMResponse(
            messages=[AssistantMessage(blocks=[TextBlock(text="It is noon in Oslo.")])],
            stop_reason=StopReason.END_TURN,
            usage=Usage(input_tokens=20, output_tokens=6),
        )


async def main():
    spans = InMemorySpanExporter()
    telemetry = configure_telemetry(service_name="wheel-app", span_exporter=spans, console=False)
    provider = CannedLLM()
    system = [SystemMessage(blocks=[TextBlock(text="Be brief.")])]
    config = ChatConfig(llm_config=llm_config(provider, "gpt-4o"), system=system)
    services = {ChatConfig: config, **provider_services(provider)}
    runtime = AgentRuntime(agents={"assistant": ChatAgent}, services=services)
    OtelHooks().install(runtime)
    result = await runtime.run(agent=ChatAgent, spec=chat_spec("Time in Oslo?"))
    telemetry.shutdown()
    print("RESULT " + json.dumps({
        "answer": result.response,
        "installed_at": flowra_otel.__file__,
        "spans": sorted([s.name, s.parent is None] for s in spans.get_finished_spans()),
    }))


asyncio.run(main())
""".replace("APP_DIALECT", APP_DIALECT)


pytestmark = pytest.mark.skipif(
    FLOWRA not in EDGE_RELEASES,
    reason=f"the wheel is installed on each line's and era's lowest and highest release ({', '.join(EDGE_RELEASES)})",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    yield from install(tmp_path_factory.mktemp("wheel-install"))


def test_installing_keeps_the_apps_flowra_and_one_line_traces_it(installed: Installed) -> None:
    assert installed_flowra(installed.python) == FLOWRA  # (also checked right after the install)
    app = installed.app_dir / "app.py"
    app.write_text(textwrap.dedent(APP), encoding="utf-8")
    proc = run([installed.python, "-W", "error", app], cwd=installed.app_dir)
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    report = json.loads(line.removeprefix("RESULT "))
    assert report["answer"] == "It is noon in Oslo."
    assert Path(report["installed_at"]).is_relative_to(installed.python.parent.parent)
    assert report["spans"] == [["chat gpt-4o", False], ["invoke_agent assistant", True]]


@pytest.mark.skipif(FLOWRA != "0.0.93", reason="one unsupported-release install is enough: on the locked flowra only")
def test_an_unsupported_flowra_is_kept_and_named_in_a_clear_error(tmp_path: Path) -> None:
    """flowra 0.0.46 (the last release of another hook API): pip keeps it, and setting up tracing
    raises ``UnsupportedFlowraError`` naming the supported releases."""
    (env,) = install(tmp_path, flowra="0.0.46")
    code = (
        "from flowra_otel import OtelHooks, UnsupportedFlowraError\n"
        "try:\n    OtelHooks()\nexcept UnsupportedFlowraError as e:\n    print('ERROR', e)\n"
    )
    out = run([env.python, "-c", code], cwd=env.app_dir).stdout
    assert installed_flowra(env.python) == "0.0.46"
    assert out.startswith("ERROR flowra 0.0.46 is not supported by flowra_otel; supported: flowra 0.0.3 - 0.0.8")
    assert "0.0.47 - 0.0.93" in out
