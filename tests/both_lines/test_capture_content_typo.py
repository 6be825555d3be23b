"""A mistyped ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is reported once, with the values.

The variable is read by every ``OtelHooks`` and by ``configure_telemetry`` (to decide on logs for
content events); each read used to warn, without saying what would have been accepted. In a fresh
interpreter, as an app does it: ``configure_telemetry()``, two ``OtelHooks``, a real flowra run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.examples_run import ROOT

APP = """
import asyncio
import logging

logging.basicConfig(format="%(name)s %(levelname)s %(message)s")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.export import configure_telemetry
from tests.both_lines.line import S

exporter = InMemorySpanExporter()
handles = configure_telemetry(span_exporter=exporter)


async def main() -> None:
    OtelHooks()
    print(await S.plain_run(OtelHooks(), S.answer("Hi."), text="SECRET-QUESTION"))


asyncio.run(main())
handles.force_flush()
content = [k for s in exporter.get_finished_spans() for k, v in s.attributes.items() if "SECRET-QUESTION" in str(v)]
print("spans", len(exporter.get_finished_spans()), "content", content)
"""


def test_a_mistyped_content_switch_is_reported_once_with_the_valid_values() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(APP)],
        cwd=ROOT,
        env={**clean, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "ture"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "Hi."
    assert proc.stdout.splitlines()[1].startswith("spans ") and proc.stdout.splitlines()[1].endswith(" content []")
    lines = [line for line in proc.stderr.splitlines() if "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in line]
    assert len(lines) == 1, proc.stderr
    (line,) = lines
    assert "'ture' is not a recognised value, so content capture stays off" in line
    for value in ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT", "true/false"):
        assert value in line, line
    assert "SECRET-QUESTION" not in proc.stderr
