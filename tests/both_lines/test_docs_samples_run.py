"""Every Python sample in docs/ runs on the flowra line it names, so the docs stay true.

Each ```` ```python ```` block in ``docs/*.md`` is preceded by a marker line naming where it runs:
``<!-- sample: both -->``, ``<!-- sample: runtime_hooks -->`` (today's flowra, ``runtime.hooks``),
``<!-- sample: hook_registry -->`` (flowra 0.0.3 - 0.0.8), or ``<!-- sample: none (why) -->`` for a
fragment that cannot run alone. A block without a marker fails the suite, so a new sample is
either run or says why not.

A sample runs in a fresh interpreter (no ``OTEL_*`` variable from the developer's shell) after a
prelude giving it what the docs call "yours": ``runtime`` (a real ``AgentRuntime`` with a
scripted model and a tool) or ``hooks`` (the ``HookRegistry`` it gets on the old line),
``scrub`` / ``scrub_dict`` and ``my_redaction_hook``. Then the agent really runs once, through
whatever the sample installed. It must exit 0: an import the line does not have
(``flowra.lib.tool_loop`` on today's flowra), a method it lacks, or an option the plugin rejects
fails here.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

from tests.both_lines.line import S
from tests.examples_run import ROOT

DOCS = ROOT / "docs"
MARKER = re.compile(r"<!-- sample: (both|runtime_hooks|hook_registry|none \(.+\)) -->")

PRELUDE = {
    "runtime_hooks": """
import asyncio
from flowra_otel import OtelHooks
from tests.runtime_hooks.support import (
    ScriptedProvider, chat_runtime, lookup_customer, run_chat, text_response, tool_calls_response,
)

runtime = chat_runtime(
    ScriptedProvider(tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), text_response("Done.")),
    lookup_customer,
)
""",
    "hook_registry": """
import asyncio
from flowra.agent import HookRegistry
from flowra_otel import OtelHooks
from tests.hook_registry.flowra_support import (
    ScriptedProvider, create_tool_registry, run_tool_loop, text_response, tool_calls_response, tool_loop_runtime,
)
from tests.hook_registry.scenarios import lookup_customer

hooks = HookRegistry()
runtime = tool_loop_runtime(
    ScriptedProvider([tool_calls_response([("c1", "lookup_customer", {"name": "Ada"})]), text_response("Done.")]),
    asyncio.run(create_tool_registry(lookup_customer)),  # local tools only: nothing to close
    hooks,
)
""",
}
COMMON = """
def scrub(content):
    return content


def scrub_dict(values):
    return dict(values)


def my_redaction_hook(event):
    pass
"""
RUN = {
    "runtime_hooks": """
print("answer:", asyncio.run(run_chat(runtime, "Who is Ada?")).response)
""",
    "hook_registry": """
print("answer:", asyncio.run(run_tool_loop(runtime, "Who is Ada?")).result_message.blocks[0].text)
""",
}


@dataclass(frozen=True)
class Sample:
    page: str
    line_no: int
    where: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line_no}"


def samples() -> list[Sample]:
    found: list[Sample] = []
    for page in sorted(DOCS.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                start = i
                end = lines.index("```", i + 1)
                marker = MARKER.fullmatch(lines[start - 1].strip()) if start > 0 else None
                where = marker.group(1) if marker else "unmarked"
                found.append(Sample(page.name, start + 1, where, "\n".join(lines[start + 1 : end])))
                i = end
            i += 1
    return found


SAMPLES = samples()


def _result_is_a_list() -> bool:
    """flowra 0.0.57: ``AfterToolCallEvent.result`` is ``list[UserBlock]`` (a block on every other release)."""
    if S.LINE != "runtime_hooks":
        return False
    events = importlib.import_module("flowra.lib.turn.hook_events")
    return "list" in str(events.AfterToolCallEvent.__dataclass_fields__["result"].type)


def test_every_docs_sample_says_where_it_runs() -> None:
    assert SAMPLES, "no Python samples found in docs/"
    unmarked = [s.id for s in SAMPLES if s.where == "unmarked"]
    assert unmarked == [], f"python blocks without a '<!-- sample: ... -->' line before them: {unmarked}"


@pytest.mark.parametrize("sample", [s for s in SAMPLES if not s.where.startswith("none")], ids=lambda s: s.id)
def test_the_docs_sample_runs_on_its_line(sample: Sample) -> None:
    if sample.where not in ("both", S.LINE):
        pytest.skip(f"a sample for the {sample.where} line (this is {S.LINE})")
    if "event.data.result" in sample.code and _result_is_a_list():
        pytest.skip("flowra 0.0.57 alone gives AfterToolCallEvent.result as a list (docs/redaction.md says so)")
    program = "\n".join(
        [textwrap.dedent(PRELUDE[S.LINE]), COMMON, "# --- the sample ---", sample.code, textwrap.dedent(RUN[S.LINE])]
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{sample.id} failed on {S.LINE}:\n{proc.stdout}\n{proc.stderr}"
    assert "answer: Done." in proc.stdout, proc.stdout
