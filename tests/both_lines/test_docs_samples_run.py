"""Every Python sample in docs/ runs on the flowra line it names, so the docs stay true.

Each ```` ```python ```` block in ``docs/*.md`` is preceded by a marker line naming where it runs:
``<!-- sample: both -->``, ``<!-- sample: runtime_hooks -->`` (today's flowra, ``runtime.hooks``),
``<!-- sample: hook_registry -->`` (flowra 0.0.3 - 0.0.8), or ``<!-- sample: none (why) -->`` for a
fragment that cannot run alone. A block without a marker fails the suite, so a new sample is
either run or says why not.

A sample runs in a fresh interpreter (no ``OTEL_*`` variable from the developer's shell) after a
prelude giving it what the docs call "yours": ``runtime`` (a real ``AgentRuntime`` with a
scripted model and a tool whose record holds an SSN and a card number) or ``hooks`` (the
``HookRegistry`` it gets on the old line), ``scrub`` (a ``str -> str`` function that masks digits
and, like ``re.sub``, raises on anything but text: a hook that hands it a list of blocks fails the
run) / ``scrub_dict`` and ``my_redaction_hook``. Then the agent really runs once, through whatever
the sample installed. It must exit 0: an import the line does not have (``flowra.lib.tool_loop`` on
today's flowra), a method it lacks, or an option the plugin rejects fails here.

Two more kinds, named after the line in the marker:

- ``... after a run -->``: the sample runs after the agent ran once with ``OtelHooks(redaction_hmac_key=KEY)``
  and a redaction hook on the tool's result, with ``KEY`` and ``span_attrs`` (the ``execute_tool``
  span's attributes) given: an auditor's check of the ledger.
- ``... as a test -->``: the sample is a user's test file; it runs under pytest (a session of its own,
  as in the user's project, with the package's ``flowra_otel_capture`` fixture) after a prelude
  giving ``my_runtime()`` and ``run_my_agent(runtime)``, and must pass; then it runs again without
  its ``.on(AfterToolCallEvent, ...)`` line, and must fail with the leak (the paired negative: the
  user's test catches a missing redaction).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.both_lines.line import S
from tests.examples_run import ROOT

DOCS = ROOT / "docs"
MARKER = re.compile(r"<!-- sample: (both|runtime_hooks|hook_registry|none \(.+\))( after a run| as a test)? -->")

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
import re


def scrub(content):
    return re.sub(r"[0-9]", "#", content)  # a str -> str function: re.sub raises TypeError on a list


def scrub_dict(values):
    return dict(values)


def my_redaction_hook(event):
    pass
"""
AFTER_A_RUN = {
    # an app with OtelHooks(redaction_hmac_key=KEY) and a redaction hook on the tool's result
    "runtime_hooks": """
from flowra.lib.turn import AfterToolCallEvent
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from flowra_otel.redaction import map_result_text

KEY = "the-key-you-gave-OtelHooks-0123456789"
_exporter = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
OtelHooks(tracer_provider=_provider, redaction_hmac_key=KEY).install(runtime)
runtime.hooks.on(AfterToolCallEvent, lambda e: setattr(e.data, "result", map_result_text(e.data.result, scrub)))
""",
    "hook_registry": """
from flowra.lib.tool_loop import AfterToolCallEvent
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from flowra_otel.redaction import map_result_text

KEY = "the-key-you-gave-OtelHooks-0123456789"
_exporter = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_exporter))
hooks.add(OtelHooks(tracer_provider=_provider, redaction_hmac_key=KEY))
hooks.on(AfterToolCallEvent, lambda e: setattr(e.data, "result", map_result_text(e.data.result, scrub)))
""",
}
SPAN_ATTRS = """
(span_attrs,) = [dict(s.attributes) for s in _exporter.get_finished_spans() if s.name.startswith("execute_tool")]
"""
AS_A_TEST = {
    # the user's app, as their test module has it
    "runtime_hooks": """
from tests.runtime_hooks.support import (
    ScriptedProvider, chat_runtime, lookup_customer, run_chat, text_response, tool_calls_response,
)


def my_runtime():
    return chat_runtime(
        ScriptedProvider(tool_calls_response(("c1", "lookup_customer", {"name": "Ada"})), text_response("Done.")),
        lookup_customer,
    )


async def run_my_agent(runtime):
    return await run_chat(runtime, "Who is Ada?")
""",
    "hook_registry": """
from tests.hook_registry.flowra_support import (
    ScriptedProvider, create_tool_registry, run_tool_loop, text_response, tool_calls_response, tool_loop_runtime,
)
from tests.hook_registry.scenarios import lookup_customer


def my_runtime(hooks):
    import asyncio

    return tool_loop_runtime(
        ScriptedProvider([tool_calls_response([("c1", "lookup_customer", {"name": "Ada"})]), text_response("Done.")]),
        asyncio.run(create_tool_registry(lookup_customer)),
        hooks,
    )


async def run_my_agent(runtime):
    return await run_tool_loop(runtime, "Who is Ada?")
""",
}
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
                where = marker.group(1) + (marker.group(2) or "") if marker else "unmarked"
                found.append(Sample(page.name, start + 1, where, "\n".join(lines[start + 1 : end])))
                i = end
            i += 1
    return found


SAMPLES = samples()


def test_every_docs_sample_says_where_it_runs() -> None:
    assert SAMPLES, "no Python samples found in docs/"
    unmarked = [s.id for s in SAMPLES if s.where == "unmarked"]
    assert unmarked == [], f"python blocks without a '<!-- sample: ... -->' line before them: {unmarked}"


@pytest.mark.parametrize("sample", [s for s in SAMPLES if not s.where.startswith("none")], ids=lambda s: s.id)
def test_the_docs_sample_runs_on_its_line(sample: Sample, tmp_path: Path) -> None:
    line, _, kind = sample.where.partition(" ")
    if line not in ("both", S.LINE):
        pytest.skip(f"a sample for the {line} line (this is {S.LINE})")
    if kind == "as a test":
        run_as_a_users_test(sample, tmp_path)
        return
    parts = [textwrap.dedent(PRELUDE[S.LINE]), COMMON]
    if kind == "after a run":
        parts += [
            textwrap.dedent(AFTER_A_RUN[S.LINE]),
            textwrap.dedent(RUN[S.LINE]),
            SPAN_ATTRS,
            "# --- the sample ---",
        ]
        parts += [sample.code]
    else:
        parts += ["# --- the sample ---", sample.code, textwrap.dedent(RUN[S.LINE])]
    proc = run_python(["-c", "\n".join(parts)])
    assert proc.returncode == 0, f"{sample.id} failed on {S.LINE}:\n{proc.stdout}\n{proc.stderr}"
    assert "answer: Done." in proc.stdout, proc.stdout


def run_python(args: list[str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    clean["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), clean.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120, check=False
    )


def run_as_a_users_test(sample: Sample, tmp_path: Path) -> None:
    """The sample as a test module of the user's own suite (a pytest session of its own, in a folder
    with nothing of this repository's configuration): it passes, and fails once its redaction hook
    is not registered."""
    source = "\n".join([textwrap.dedent(AS_A_TEST[S.LINE]), "# --- the sample ---", sample.code])
    hook_line = re.compile(r"^\s*\S+\.on\(AfterToolCallEvent, .*\)\s*$", re.MULTILINE)
    assert len(hook_line.findall(source)) == 1, "the sample registers its redaction hook in one line"
    for name, code, passes in (
        ("test_redaction", source, True),
        ("test_no_redaction", hook_line.sub("", source), False),
    ):
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}.py").write_text(code, encoding="utf-8")
        (folder / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        proc = run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(folder), str(folder)])
        if passes:
            assert proc.returncode == 0, f"{sample.id} failed on {S.LINE}:\n{proc.stdout}\n{proc.stderr}"
            assert " passed" in proc.stdout, proc.stdout
        else:  # the user's test catches the missing hook, by the leak
            assert proc.returncode == 1, f"{sample.id} without its hook did not fail:\n{proc.stdout}\n{proc.stderr}"
            assert "secret leak(s) in exported spans" in proc.stdout, proc.stdout
