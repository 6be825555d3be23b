"""Forgetting ``configure_telemetry()`` is not silent: one warning, naming the fix.

``OtelHooks().install(runtime)`` with no SDK set up records into the OpenTelemetry API's no-op
placeholder, so nothing is printed or exported. Each case runs a real flowra agent (the installed
line's scenarios) twice in a fresh interpreter, whose global providers are its own, and counts
the warning on stderr: once when nothing was set up by the first run, never when the app set up
a provider itself (before or after installing the hooks), passed one, or turned the SDK off.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from flowra_otel.core.provider_check import NO_SDK_WARNING
from tests.examples_run import ROOT

APP = """
import asyncio
import logging

logging.basicConfig(format="%(name)s %(levelname)s %(message)s")

from flowra_otel import OtelHooks
from tests.both_lines.line import S

BEFORE


async def main() -> None:
    otel = OtelHooks(KWARGS)
    AFTER
    for question in ("Hello?", "Again?"):
        print(await S.plain_run(otel, S.answer("Hi."), text=question))


asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("before", "kwargs", "after", "env", "warnings"),
    [
        pytest.param("", "", "", {}, 1, id="nothing-set-up"),
        pytest.param(
            "", "", "", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, 1, id="only-variables"
        ),
        pytest.param(
            "from flowra_otel.export import configure_telemetry\nconfigure_telemetry(console=False)",
            "",
            "",
            {},
            0,
            id="configure_telemetry",
        ),
        pytest.param(
            "",
            "",
            "from flowra_otel.export import configure_telemetry; configure_telemetry(console=False)",
            {},
            0,
            id="configured-after-install",
        ),
        pytest.param(
            "from opentelemetry import trace\nfrom opentelemetry.sdk.trace import TracerProvider\n"
            "trace.set_tracer_provider(TracerProvider())",
            "",
            "",
            {},
            0,
            id="own-sdk-provider",
        ),
        pytest.param(
            "from opentelemetry import trace\ntrace.set_tracer_provider(trace.NoOpTracerProvider())",
            "",
            "",
            {},
            0,
            id="own-non-sdk-provider",
        ),
        pytest.param(
            "from opentelemetry.sdk.trace import TracerProvider",
            "tracer_provider=TracerProvider()",
            "",
            {},
            0,
            id="explicit-provider",
        ),
        pytest.param("", "", "", {"OTEL_SDK_DISABLED": "true"}, 0, id="sdk-disabled-on-purpose"),
    ],
)
def test_warns_once_when_no_sdk_is_set_up(
    before: str, kwargs: str, after: str, env: dict[str, str], warnings: int
) -> None:
    code = textwrap.dedent(APP).replace("BEFORE", before).replace("KWARGS", kwargs).replace("AFTER", after)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hi.\nHi.\n", proc.stdout  # the agent's result is unchanged
    assert proc.stderr.count(f"flowra_otel WARNING {NO_SDK_WARNING}") == warnings, proc.stderr
    assert proc.stderr.count("spans go nowhere") == warnings, proc.stderr
    if warnings:
        assert "configure_telemetry()" in NO_SDK_WARNING and "OtelHooks(tracer_provider=...)" in NO_SDK_WARNING
