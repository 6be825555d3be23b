"""The examples run as documented (``python examples/X.py``) and print what their docstrings promise.

Each runs in a fresh interpreter, the way a reader runs it, with no ``OTEL_*`` variable from the
developer's shell. They are written for the current flowra API (entry steps, agents as tools),
so they are skipped on flowra older than 0.0.6; ``multi_agent.py`` also defines its own agent
with plain dataclass spec/result, which flowra accepts from 0.0.7.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import examples_run
from tests.hook_registry.flowra_support import FLOWRA_VERSION, HAS_AGENT_TOOLS, HAS_PLAIN_RESULTS

pytestmark = pytest.mark.skipif(
    not HAS_AGENT_TOOLS, reason=f"the examples use the flowra >= 0.0.6 API; installed: {FLOWRA_VERSION}"
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hook_registry"


def run_example(name: str, **env: str) -> subprocess.CompletedProcess[str]:
    return examples_run.run_example(EXAMPLES, name, **env)


@pytest.mark.skipif(
    not HAS_PLAIN_RESULTS,
    reason=f"multi_agent.py's ResearchAgent returns a plain dataclass (flowra >= 0.0.7); installed: {FLOWRA_VERSION}",
)
def test_multi_agent_prints_the_nested_tree() -> None:
    out = run_example("multi_agent.py").stdout
    lines = out.splitlines()
    assert lines[0].startswith("trace ")
    assert lines[1].startswith("invoke_agent assistant  ")
    assert any(line.startswith("├─ execute_tool research  ") for line in lines)
    assert any(line.startswith("│  └─ invoke_agent research  ") for line in lines)
    assert any(line.startswith("│     ├─ execute_tool search_web  ") for line in lines)
    assert out.rstrip().endswith(
        "answer: Python 3.13 adds a new interactive shell, an experimental free-threaded build and a JIT."
    )


def test_redaction_audit_is_clean_with_the_hook_and_finds_the_leak_without() -> None:
    out = run_example("redaction_audit.py").stdout
    clean, leaky = out.split("=== audit without it (a planted leak): exit status 1\n")
    assert clean.startswith("=== audit with the redaction hook: exit status 0\n")
    assert '      flowra.redaction.result.handlers = ["__main__.scrub_customer_record"]' in clean
    assert "result: clean" in clean
    assert "LEAK api_key: span 'execute_tool lookup_customer'" in leaky
    assert "LEAK email: span 'chat gpt-4o'" in leaky
    assert "result: LEAK (4 finding(s))" in leaky
