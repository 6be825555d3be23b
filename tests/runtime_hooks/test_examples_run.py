"""The examples for flowra 0.0.86+ run as documented (``python examples/X.py``) and print what their
docstrings (and, for the quickstart, the README) promise.

Each runs in a fresh interpreter, the way a reader runs it, with no ``OTEL_*`` variable from the
developer's shell. The same assertions as ``tests/hook_registry/test_examples_run.py`` (the
examples for flowra 0.0.3 - 0.0.8), on today's agents: flowra's ``ChatAgent``, whose tool loop
and agents used as tools are runtime children (hence ``invoke_agent research/turn``).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from flowra_otel.adapters.runtime_hooks import mcp_client
from tests import examples_run, mcp_server_process
from tests.runtime_hooks.scenarios import EXAMPLES_SKIP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
pytestmark = pytest.mark.skipif(EXAMPLES_SKIP is not None, reason=EXAMPLES_SKIP or "")


def run_example(name: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return examples_run.run_example(EXAMPLES, name, *args, **env)


def tree_of(lines: list[str]) -> list[str]:
    """The tree's lines without durations and attributes (from the duration on)."""
    return [re.split(r"  \d", line, maxsplit=1)[0] for line in lines]


def readme_demo_output() -> list[str]:
    """What the README shows ``./dev demo`` printing (the code block that starts with a
    ``trace <id>`` line and the quickstart's root span)."""
    blocks = (ROOT / "README.md").read_text(encoding="utf-8").split("```")
    shown = [
        block.strip("\n").splitlines()
        for block in blocks[1::2]
        if block.startswith("\ntrace ") and "\ninvoke_agent concierge" in block
    ]
    assert shown, "the README shows no demo output (a block starting with 'trace <id>')"
    return shown[0]


def test_quickstart_prints_the_tree_the_readme_shows() -> None:
    out = run_example("quickstart.py").stdout
    lines = out.splitlines()
    assert lines[0].startswith("trace ")
    assert tree_of(lines[1:11]) == [
        "invoke_agent concierge",
        "├─ chat sonnet-4-5",
        "├─ execute_tool get_weather",
        "├─ execute_tool research",
        "│  └─ invoke_agent research",
        "│     └─ invoke_agent research/turn",
        "│        ├─ chat sonnet-4-5",
        "│        ├─ execute_tool get_weather",
        "│        └─ chat sonnet-4-5",
        "└─ chat sonnet-4-5",
    ], out
    assert out.rstrip().endswith("agent answered: Porto is mild and cloudy; Lisbon is sunny and 24°C. Go south!")
    # The README shows the whole output, line for line: the trace id and durations differ per run.
    shown = readme_demo_output()
    assert re.fullmatch(r"trace [0-9a-f]{32}", shown[0]) and re.fullmatch(r"trace [0-9a-f]{32}", lines[0])
    assert tree_of(shown[1:]) == tree_of(lines[1:]), (shown, lines)


def test_multi_agent_prints_the_nested_tree() -> None:
    out = run_example("multi_agent.py").stdout
    lines = out.splitlines()
    assert lines[0].startswith("trace ")
    assert tree_of(lines[1:10]) == [
        "invoke_agent assistant",
        "├─ chat gpt-4o",
        "├─ execute_tool research",
        "│  └─ invoke_agent research",
        "│     └─ invoke_agent research/turn",
        "│        ├─ chat gpt-4o-mini",
        "│        ├─ execute_tool search_web",
        "│        └─ chat gpt-4o-mini",
        "└─ chat gpt-4o",
    ], out
    assert out.rstrip().endswith(
        "answer: Python 3.13 adds a new interactive shell, an experimental free-threaded build and a JIT."
    )


def test_redaction_audit_is_clean_with_the_hook_and_finds_the_leak_without() -> None:
    out = run_example("redaction_audit.py").stdout
    clean, leaky = out.split("=== audit without it (a planted leak): exit status 1\n")
    assert clean.startswith(
        "=== audit with the redaction hook: exit status 0\n"
        "flowra-otel audit: redacted.jsonl (OTLP JSON: 1 trace(s), 4 span(s))\n"
    )
    assert '      flowra.redaction.result.handlers = ["__main__.scrub_customer_record"]' in clean
    assert "result: clean" in clean
    assert leaky.startswith("flowra-otel audit: leaky.jsonl (OTLP JSON: 1 trace(s), 4 span(s))\n")
    assert "    redaction ledger: none (no hook changed the arguments or the result)" in leaky
    assert "LEAK api_key: span 'execute_tool lookup_customer'" in leaky
    assert "LEAK email: span 'chat gpt-4o'" in leaky
    assert "result: LEAK (4 finding(s))" in leaky


def test_the_mcp_pair_makes_one_trace_across_both_processes(tmp_path: Path) -> None:
    """examples/mcp_server.py in the MCP server's own environment (requirements/mcp.lock: the ``mcp``
    SDK and the OpenTelemetry SDK, no flowra) and examples/mcp_agent.py here, both appending to one
    traces file, as their docstrings say: the agent's tree, its answer, and the audit of the file
    (one tool call; the server's span of it continues the agent's ``execute_tool`` span, where this
    flowra's client carries the context)."""
    traces = tmp_path / "spans.jsonl"
    port = mcp_server_process.free_port()
    server = subprocess.Popen(
        [
            mcp_server_process.mcp_python(),
            str(EXAMPLES / "mcp_server.py"),
            "--port",
            str(port),
            "--traces-file",
            str(traces),
        ],
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            assert server.poll() is None and time.monotonic() < deadline, "the example MCP server did not start"
            time.sleep(0.1)
        out = run_example("mcp_agent.py", "--url", f"http://127.0.0.1:{port}/mcp", "--traces-file", str(traces)).stdout
    finally:
        server.terminate()
        server.wait(10)
        if server.stdout is not None:
            server.stdout.close()
    lines = out.splitlines()
    assert lines[0].startswith("trace ")
    assert tree_of(lines[1:5]) == [
        "invoke_agent assistant",
        "├─ chat gpt-4o",
        "├─ execute_tool forecast",
        "└─ chat gpt-4o",
    ], out
    assert "agent answered: It is sunny and 24°C in Oslo." in out
    assert "\ntool calls: 1\n" in out and "\nMCP server spans: 1 " in out
    (call,) = re.findall(r"  forecast  call_id=call_1  status=ok  trace_id=(\w+)  span_id=(\w+)", out)
    (served,) = re.findall(r"  forecast  service=weather-mcp-server  status=ok  continues=(.+?)  trace_id=(\w+)", out)
    if mcp_client.CALL_TAKES_META:
        assert served == (f"span_id={call[1]}", call[0])  # one trace: the server's span under execute_tool
    else:
        assert served[0] == "none (a trace of its own)"
    assert out.rstrip().endswith("result: clean")
