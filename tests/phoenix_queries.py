"""What the Phoenix end-to-end tests of both flowra lines share: running a line's app in its own
process against a ``phoenix serve`` (``tests/phoenix_server.py``), and reading the result back
the way Phoenix presents it (REST spans, OpenInference message attributes, GraphQL sessions).

Line-neutral: nothing here imports flowra. Each line has its app (``tests/<line>/phoenix_app.py``,
run as ``python -m tests.<line>.phoenix_app CONVERSATION_ID``: it exports with
``configure_telemetry()`` and prints one JSON line last) and its test
(``tests/<line>/test_phoenix_backend.py``), which asserts the tree its flowra makes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from tests.phoenix_server import PhoenixServer

Protocol = Literal["http/protobuf", "grpc"]
PROTOCOLS: Final[tuple[Protocol, ...]] = ("http/protobuf", "grpc")
PROTOCOL_IDS: Final = ("http", "grpc")
APP_TIMEOUT_S: Final = 120
SERVICE_NAME: Final = "flowra-phoenix-e2e"
REPO: Final = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PhoenixRun:
    """One app run as Phoenix holds it (a project of its own)."""

    protocol: Protocol
    project: str
    spans: list[dict[str, Any]]
    """As ``GET /v1/projects/{project}/spans`` returns them."""

    def named(self, name: str) -> list[dict[str, Any]]:
        return sorted((s for s in self.spans if s["name"] == name), key=lambda s: s["start_time"])

    def one(self, name: str) -> dict[str, Any]:
        (span,) = self.named(name)
        return span

    def by_id(self, span_id: str) -> dict[str, Any]:
        (span,) = [s for s in self.spans if s["context"]["span_id"] == span_id]
        return span

    def children(self, span: dict[str, Any]) -> list[str]:
        """The names of ``span``'s children, sorted."""
        sid = span["context"]["span_id"]
        return sorted(s["name"] for s in self.spans if s["parent_id"] == sid)

    def children_of(self, span: dict[str, Any], name: str) -> list[dict[str, Any]]:
        """``span``'s children called ``name``, in start order."""
        sid = span["context"]["span_id"]
        return [s for s in self.named(name) if s["parent_id"] == sid]

    def span_kinds(self) -> dict[str, set[str]]:
        """Operation (the span name's first word) -> the OpenInference span kinds Phoenix shows."""
        kinds: dict[str, set[str]] = {}
        for span in self.spans:
            kinds.setdefault(span["name"].split()[0], set()).add(span["span_kind"])
        return kinds


def project_of(protocol: Protocol, prefix: str = "flowra-e2e") -> str:
    return f"{prefix}-{'grpc' if protocol == 'grpc' else 'http'}"


def conversation_id(project: str) -> str:
    return f"conv-{project}"


def run_app(phoenix: PhoenixServer, protocol: Protocol, project: str, module: str) -> dict[str, Any]:
    """``python -m module CONVERSATION_ID`` in its own process, exporting to ``phoenix`` with
    ``configure_telemetry()`` from the standard variables; the JSON summary it printed last."""
    endpoint = phoenix.grpc_endpoint if protocol == "grpc" else f"{phoenix.url}/v1/traces"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,  # Phoenix takes no metrics: traces only
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_SERVICE_NAME": SERVICE_NAME,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
    }
    proc = subprocess.run(
        [sys.executable, "-m", module, conversation_id(project)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=APP_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"app failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return summary


def messages(span: dict[str, Any], direction: Literal["input", "output"]) -> list[dict[str, Any]]:
    """``llm.{input,output}_messages.N.message.*`` (flat keys, as Phoenix returns them) as a list."""
    prefix = f"llm.{direction}_messages."
    found: dict[int, dict[str, Any]] = {}
    for key, value in span["attributes"].items():
        if key.startswith(prefix):
            index, _, rest = key.removeprefix(prefix).partition(".")
            found.setdefault(int(index), {})[rest.removeprefix("message.")] = value
    return [found[i] for i in sorted(found)]


def tool_calls(message: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """A message's ``tool_calls.N.tool_call.*`` as ``(id, name, arguments)``, in order."""
    calls: dict[int, dict[str, Any]] = {}
    for key, value in message.items():
        if key.startswith("tool_calls."):
            index, _, rest = key.removeprefix("tool_calls.").partition(".")
            calls.setdefault(int(index), {})[rest.removeprefix("tool_call.")] = value
    return [
        (c["id"], c["function.name"], json.loads(c["function.arguments"])) for c in (calls[i] for i in sorted(calls))
    ]


def tool_messages(span: dict[str, Any]) -> dict[Any, Any]:
    """The ``tool`` messages of an LLM span's input: tool call id -> content."""
    return {m.get("tool_call_id"): m.get("content") for m in messages(span, "input") if m["role"] == "tool"}


SESSIONS_QUERY: Final = """
{
  projects { edges { node { name
    sessions(first: 10) { edges { node { sessionId numTraces
      firstInput { value } lastOutput { value } } } } } } }
}
"""


def sessions(phoenix: PhoenixServer, project: str) -> list[dict[str, Any]]:
    """``project``'s sessions as Phoenix's GraphQL API gives them (id, traces, first input, last output)."""
    data = phoenix.graphql(SESSIONS_QUERY)
    (project_node,) = [e["node"] for e in data["projects"]["edges"] if e["node"]["name"] == project]
    return [e["node"] for e in project_node["sessions"]["edges"]]


def given_out(phoenix: PhoenixServer, run: PhoenixRun) -> dict[str, str]:
    """Everything Phoenix gives out about ``run``, as text: its REST spans, its OTLP-JSON spans
    and its GraphQL sessions (where a secret would show)."""
    otlp = phoenix.get_json(f"/v1/projects/{run.project}/spans/otlpv1", limit=1000)
    return {
        "REST spans": json.dumps(run.spans, ensure_ascii=False),
        "REST otlpv1 spans": json.dumps(otlp, ensure_ascii=False),
        "GraphQL sessions": json.dumps(sessions(phoenix, run.project), ensure_ascii=False),
    }
