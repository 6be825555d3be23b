"""End to end against MLflow, the second real GenAI trace backend: ``mlflow server`` over OTLP/HTTP.

A multi-agent run (``tests/runtime_hooks/collector_workload.py``: an assistant calling a research
agent as a tool, whose tools include one that raises and one whose secrets a redaction hook masks;
content capture on) exports the way a user would set it up: ``configure_telemetry()`` with
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` = the server's ``/v1/traces`` and the experiment id header
in ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``. The trace is read back through MLflow's REST API
(``tests/mlflow_server.py``) and checked as MLflow presents it: the tree, span types, span inputs
and outputs (MLflow's reading of ``gen_ai.input/output.messages`` and the tool payloads), the
trace list's request/response preview, token usage (per model call, and the trace's total, which
MLflow takes from the root span: it must be the run's total, counted once), the session (from
``gen_ai.conversation.id``), the failed tool -- and no secret anywhere MLflow gives out
(``flowra_otel.testing.assert_no_leak`` over MLflow's spans and trace info; the paired negative
sends the same run without the redaction hook and finds the secrets there).

MLflow takes no metrics (``/v1/metrics`` answers 404): with only the base endpoint set, the
program gets one warning naming the fix, and no error per export.

Needs ``FLOWRA_OTEL_MLFLOW`` (the ``mlflow`` executable; ``./dev test`` builds the venv from
``requirements/mlflow.lock``): skipped without it on a developer machine, failed in CI.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, Status, StatusCode

from flowra_otel.export import configure_telemetry
from flowra_otel.testing import assert_no_leak, find_leaks
from tests.backend_env import require_executable
from tests.jaeger_stack import exported_records
from tests.metrics_refusal import export_with_base_endpoint
from tests.mlflow_server import (
    EXPERIMENT_ID_HEADER,
    MLFLOW_ENV,
    MlflowServer,
    running_mlflow,
    trace_metadata_json,
)
from tests.otlp_receiver import SpanRecord
from tests.runtime_hooks import collector_workload as app

CONVERSATION: Final = "conv-mlflow-e2e"
UNREDACTED_CONVERSATION: Final = "conv-mlflow-unredacted"
SPAN_TYPES: Final = {"invoke_agent": "AGENT", "chat": "CHAT_MODEL", "execute_tool": "TOOL"}


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def mlflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    executable = require_executable(MLFLOW_ENV, "MLflow (requirements/mlflow.lock)")
    with running_mlflow(executable, tmp_path_factory.mktemp("mlflow")) as server:
        yield server


@pytest.fixture(scope="module")
def experiment(mlflow: MlflowServer) -> str:
    return mlflow.create_experiment("flowra-otel-e2e")


@dataclass(frozen=True)
class MlflowTrace:
    """One run as the app exported it and as MLflow returns it."""

    exported: list[SpanRecord]
    info: dict[str, Any]
    spans: list[dict[str, Any]]
    """``tests.mlflow_server.plain_span`` dicts, in MLflow's order."""

    @property
    def trace_id(self) -> str:
        return self.exported[0].trace_id

    def sent(self, span_id: str) -> SpanRecord:
        (record,) = [r for r in self.exported if r.span_id == span_id]
        return record

    def named(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"] == name]

    def root(self) -> dict[str, Any]:
        (root,) = [s for s in self.spans if s["parent_span_id"] is None]
        return root


def send_run(mlflow: MlflowServer, experiment: str, conversation: str, *, redact: bool) -> MlflowTrace:
    """The workload's multi-agent run, exported by ``configure_telemetry`` from the standard
    variables, then read back."""
    memory = InMemorySpanExporter()
    with pytest.MonkeyPatch.context() as env:
        for name, value in {
            "OTEL_SERVICE_NAME": "flowra-mlflow-e2e",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": mlflow.traces_endpoint,
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"{EXPERIMENT_ID_HEADER}={experiment}",
        }.items():
            env.setenv(name, value)
        handles = configure_telemetry(set_global=False, register_atexit=False, console=False)
    try:
        assert handles.span_exporters and not handles.metric_exporters, "traces only: the traces endpoint"
        handles.tracer_provider.add_span_processor(SimpleSpanProcessor(memory))
        asyncio.run(app.multi_agent_run(handles.tracer_provider, conversation, redact=redact))
        assert handles.force_flush(10_000)
    finally:
        handles.shutdown()
    exported = exported_records(memory.get_finished_spans())
    (trace_id,) = {r.trace_id for r in exported}
    session = f"metadata.`mlflow.trace.session` = '{conversation}'"
    deadline = time.monotonic() + 30
    found = mlflow.traces(experiment, session)
    while not [i for i in found if i.get("state") != "IN_PROGRESS"] and time.monotonic() < deadline:
        time.sleep(0.25)
        found = mlflow.traces(experiment, session)
    assert [i["trace_id"] for i in found] == [f"tr-{trace_id}"], "the session finds exactly this run"
    return MlflowTrace(exported, mlflow.trace_info(trace_id), mlflow.trace_spans(trace_id))


@pytest.fixture(scope="module")
def run(mlflow: MlflowServer, experiment: str) -> MlflowTrace:
    return send_run(mlflow, experiment, CONVERSATION, redact=True)


# ------------------------------------------------------------------------------------ the trace
def test_the_tree_and_span_types(run: MlflowTrace) -> None:
    assert len(run.spans) == app.MULTI_AGENT_SPANS == len(run.exported)
    assert {s["trace_id"] for s in run.spans} == {run.trace_id}
    # Every span, under its own parent, with its name.
    assert {(s["span_id"], s["parent_span_id"], s["name"]) for s in run.spans} == {
        (r.span_id, r.parent_span_id, r.name) for r in run.exported
    }
    root = run.root()
    assert root["name"] == "invoke_agent assistant"
    research_tool = run.named("execute_tool research")[0]
    (researcher,) = run.named("invoke_agent researcher")
    assert researcher["parent_span_id"] == research_tool["span_id"], "the agent used as a tool sits under its tool"
    for span in run.spans:
        assert span["attributes"]["mlflow.spanType"] == SPAN_TYPES[span["name"].split()[0]], span["name"]
    assert run.info["state"] == "OK"
    assert run.info["tags"]["service.name"] == "flowra-mlflow-e2e"


def test_a_failed_tool_shows_as_an_error(run: MlflowTrace) -> None:
    (explode,) = run.named("execute_tool explode")
    assert (explode["status_code"], explode["status_message"]) == ("STATUS_CODE_ERROR", "Error: boom in Rome")
    assert explode["attributes"]["error.type"] == "tool_error"
    assert "mlflow.spanOutputs" not in explode["attributes"], "a tool that raised has no result"
    others = [s for s in run.spans if s is not explode]
    assert {s["status_code"] for s in others} == {"STATUS_CODE_UNSET"}


def test_span_inputs_and_outputs_are_the_messages_and_the_tool_payloads(run: MlflowTrace) -> None:
    """What MLflow's span panel shows: ``gen_ai.input/output.messages`` of agents and model
    calls, ``gen_ai.tool.call.arguments/result`` of tools, as JSON values."""
    checked = 0
    for span in run.spans:
        sent = run.sent(span["span_id"]).attributes
        shown = span["attributes"]
        if span["name"].startswith("execute_tool "):
            inputs, outputs = sent.get("gen_ai.tool.call.arguments"), sent.get("gen_ai.tool.call.result")
        else:
            inputs, outputs = sent.get("gen_ai.input.messages"), sent.get("gen_ai.output.messages")
        for key, value in (("mlflow.spanInputs", inputs), ("mlflow.spanOutputs", outputs)):
            if value is None:
                assert key not in shown, (span["name"], key)
            else:
                assert isinstance(value, str)
                assert shown[key] == json.loads(value), (span["name"], key)
                checked += 1
    # Only the researcher agent (its TurnAgent child speaks for it) and the failed tool lack some.
    assert checked == 2 * len(run.spans) - 3
    # Spot checks of what a user reads there.
    (lookup,) = run.named("execute_tool lookup_customer")
    assert lookup["attributes"]["mlflow.spanInputs"] == {"name": "Ada"}
    assert lookup["attributes"]["mlflow.spanOutputs"] == {"content": "Ada: SSN [SSN], card [CARD]"}
    assert run.root()["attributes"]["mlflow.spanOutputs"] == [
        {"role": "assistant", "parts": [{"type": "text", "content": app.FINAL_ANSWER}]}
    ]


def test_the_trace_list_previews_the_runs_question_and_answer(run: MlflowTrace) -> None:
    """The Traces table's Request / Response columns: the root agent's input and output
    messages (which need content capture on the ``invoke_agent`` span)."""
    assert json.loads(run.info["request_preview"]) == [
        {"role": "user", "parts": [{"type": "text", "content": app.QUESTION}]}
    ]
    assert json.loads(run.info["response_preview"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": app.FINAL_ANSWER}]}
    ]


def tokens(record: SpanRecord, direction: str) -> int:
    value = record.attributes[f"gen_ai.usage.{direction}_tokens"]
    assert isinstance(value, int)
    return value


def test_token_usage_is_the_runs_total_counted_once(run: MlflowTrace) -> None:
    """MLflow's trace total comes from the root span when it carries usage (our ``invoke_agent``
    run total); it must equal the sum over the model calls, not the sum over every span with
    usage (agents and their model calls), which would count each token two or three times."""
    chats = [r for r in run.exported if r.name.startswith("chat ")]
    per_call = [(tokens(r, "input"), tokens(r, "output")) for r in chats]
    assert sorted(per_call) == sorted([(10, 5), (95, 17), (10, 5), (40, 6)])
    total_in, total_out = sum(i for i, _ in per_call), sum(o for _, o in per_call)
    assert trace_metadata_json(run.info, "mlflow.trace.tokenUsage") == {
        "input_tokens": total_in,
        "output_tokens": total_out,
        "total_tokens": total_in + total_out,
    }
    everything = sum(tokens(r, "input") for r in run.exported if "gen_ai.usage.input_tokens" in r.attributes)
    assert everything > total_in, "summing every span would double count: the check above tells them apart"
    for span in run.spans:  # each model call shows its own usage
        if span["name"].startswith("chat "):
            i, o = tokens(run.sent(span["span_id"]), "input"), tokens(run.sent(span["span_id"]), "output")
            assert span["attributes"]["mlflow.chat.tokenUsage"] == {
                "input_tokens": i,
                "output_tokens": o,
                "total_tokens": i + o,
            }
            assert (span["attributes"]["mlflow.llm.model"], span["attributes"]["mlflow.llm.provider"]) == (
                "sonnet-4-5",
                "anthropic",
            )


def test_the_conversation_id_is_the_session(run: MlflowTrace, mlflow: MlflowServer, experiment: str) -> None:
    assert run.info["trace_metadata"]["mlflow.trace.session"] == CONVERSATION
    assert {s["attributes"].get("gen_ai.conversation.id") for s in run.spans} == {CONVERSATION}
    # send_run found the trace by its session; another session finds nothing.
    assert mlflow.traces(experiment, "metadata.`mlflow.trace.session` = 'no-such-conversation'") == []


# ------------------------------------------------------------------------------------ no secret
def as_readable_spans(trace: MlflowTrace) -> list[ReadableSpan]:
    """What MLflow returned (its spans, and the trace info as one more span) as SDK spans, so
    ``assert_no_leak`` reads it like any exported span: MLflow's decoded JSON values are
    written back as JSON text (secrets inside them are found after unescaping)."""

    def plain(value: Any) -> Any:
        return value if isinstance(value, str | bool | int | float) else json.dumps(value, ensure_ascii=False)

    spans = []
    for span in trace.spans:
        context = SpanContext(int(span["trace_id"], 16), int(span["span_id"], 16), is_remote=False)
        parent = span["parent_span_id"]
        spans.append(
            ReadableSpan(
                name=span["name"],
                context=context,
                parent=SpanContext(context.trace_id, int(parent, 16), is_remote=False) if parent else None,
                attributes={k: plain(v) for k, v in span["attributes"].items() if v is not None},
                events=[
                    Event(e["name"], {k: plain(v) for k, v in e["attributes"].items()}, e["time_unix_nano"])
                    for e in span["events"]
                ],
                status=Status(
                    StatusCode.ERROR if span["status_code"] == "STATUS_CODE_ERROR" else StatusCode.UNSET,
                    span["status_message"] or None,
                ),
            )
        )
    info_context = SpanContext(int(trace.trace_id, 16), 1, is_remote=False)
    spans.append(
        ReadableSpan(
            name="mlflow trace info",
            context=info_context,
            attributes={key: plain(value) for key, value in trace.info.items()},
        )
    )
    return spans


def test_no_secret_in_anything_mlflow_gives_out(run: MlflowTrace) -> None:
    assert_no_leak(as_readable_spans(run), app.SECRETS)
    raw = json.dumps([run.info, run.spans], ensure_ascii=False)
    assert all(secret not in raw for secret in app.SECRETS)
    assert "[SSN]" in raw and "[CARD]" in raw  # the paired positive: the redacted value is there
    (lookup,) = run.named("execute_tool lookup_customer")
    assert lookup["attributes"]["flowra.redaction.applied"] is True
    assert lookup["attributes"]["flowra.redaction.fields"] == ["result"]


def test_without_the_redaction_hook_the_secrets_reach_mlflow(mlflow: MlflowServer, experiment: str) -> None:
    """The paired negative: the same run, the app's redaction hook left out."""
    unredacted = send_run(mlflow, experiment, UNREDACTED_CONVERSATION, redact=False)
    leaks = find_leaks(as_readable_spans(unredacted), app.SECRETS)
    assert {leak.secret for leak in leaks} == set(app.SECRETS)
    assert {leak.span_name for leak in leaks} >= {"execute_tool lookup_customer", "chat sonnet-4-5"}


# ------------------------------------------------------------------------------------ no metrics
def test_the_base_endpoint_gets_one_warning_for_mlflows_404_on_metrics(
    mlflow: MlflowServer, experiment: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    logged = export_with_base_endpoint(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": mlflow.url,
            "OTEL_EXPORTER_OTLP_HEADERS": f"{EXPERIMENT_ID_HEADER}={experiment}",
        },
        monkeypatch,
        caplog,
    )
    logged.assert_one_clear_warning()
    assert "(HTTP 404)" in logged.warnings[0]
    assert mlflow.trace_info(logged.trace_id)["trace_id"] == f"tr-{logged.trace_id}", "traces still arrive"


def test_mlflow_answers_404_on_metrics(mlflow: MlflowServer) -> None:
    """What the warning's status comes from: the real server's answer, not an assumption."""
    request = urllib.request.Request(f"{mlflow.url}/v1/metrics", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    refused.value.close()
    assert refused.value.code == 404
