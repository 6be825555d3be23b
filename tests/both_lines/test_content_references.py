"""Content by reference: each model call's content written to storage, its location on the span.

``OtelHooks(content_upload=<dir or file:// URL>)``, or opentelemetry-util-genai's variables
(``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=upload`` with ``..._UPLOAD_BASE_PATH`` and
``..._UPLOAD_FORMAT``), writes what a span would carry (after every hook and the redaction
pipeline) to files named as util-genai's upload hook names them, and puts
``gen_ai.{input,output}.messages_ref`` / ``gen_ai.system_instructions_ref`` /
``gen_ai.tool.definitions_ref`` on the ``chat`` span, whatever the content mode. A write that
fails is a warning without content, never the agent's problem.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel import OtelHooks
from flowra_otel.core import semconv
from flowra_otel.testing import find_leaks, secret_forms
from tests.both_lines.line import MakeHooks, S

SSN, CARD = S.SSN, S.CARD
MASK = "[MASKED]"
REFS = (
    semconv.GEN_AI_INPUT_MESSAGES_REF,
    semconv.GEN_AI_OUTPUT_MESSAGES_REF,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS_REF,
    semconv.GEN_AI_TOOL_DEFINITIONS_REF,
)
CONTENT_KEYS = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    semconv.GEN_AI_TOOL_DEFINITIONS,
)
UPLOAD_ENV = (
    "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK",
    "OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH",
    "OTEL_INSTRUMENTATION_GENAI_UPLOAD_FORMAT",
)


@pytest.fixture(autouse=True)
def no_upload_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*UPLOAD_ENV, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        monkeypatch.delenv(name, raising=False)


def masked(text: str) -> str:
    """The app's own redaction (its hook on the tool result, before the plugin sees it)."""
    return text.replace(SSN, MASK).replace(CARD, MASK)


async def run(hooks: OtelHooks) -> str:
    """The assistant looks the customer up (the app's redaction hook on its hooks), then answers."""
    answer = await S.customer_run(hooks, S.answer("Ada is on file."), mask=masked)
    assert hooks.flush_uploads(5.0)
    return answer or ""


def chats(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    spans: list[ReadableSpan] = sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    return [dict(s.attributes or {}) for s in spans]


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def local(ref: str) -> Path:
    return Path(ref.removeprefix("file://"))


async def test_content_is_written_by_reference_and_only_references_are_on_the_span(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    base = tmp_path / "genai-content"  # created on first write
    assert await run(make_otel_hooks(content_upload=base)) == "Ada is on file."
    call, answer = chats(span_exporter)
    for attrs in (call, answer):
        assert set(attrs) & set(CONTENT_KEYS) == set()  # no content mode: references only
        assert all(str(attrs[ref]).startswith(f"{base}/") for ref in REFS)
    # One file per call for the messages; the unchanged instructions and tools, written once.
    assert call[semconv.GEN_AI_INPUT_MESSAGES_REF] != answer[semconv.GEN_AI_INPUT_MESSAGES_REF]
    assert call[semconv.GEN_AI_SYSTEM_INSTRUCTIONS_REF] == answer[semconv.GEN_AI_SYSTEM_INSTRUCTIONS_REF]
    assert call[semconv.GEN_AI_TOOL_DEFINITIONS_REF] == answer[semconv.GEN_AI_TOOL_DEFINITIONS_REF]
    names = sorted(p.name.split("_", 1)[1] for p in base.iterdir())
    assert names == ["inputs.json"] * 2 + ["outputs.json"] * 2 + ["system_instruction.json", "tool.definitions.json"]
    inputs = json.loads(local(str(answer[semconv.GEN_AI_INPUT_MESSAGES_REF])).read_text(encoding="utf-8"))
    assert inputs[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": f"Ada: SSN {MASK}, card {MASK}"}],
    }  # after the app's redaction hook, as the span would have it
    outputs = json.loads(local(str(answer[semconv.GEN_AI_OUTPUT_MESSAGES_REF])).read_text(encoding="utf-8"))
    assert outputs == [{"role": "assistant", "parts": [{"type": "text", "content": "Ada is on file."}]}]
    system = json.loads(local(str(call[semconv.GEN_AI_SYSTEM_INSTRUCTIONS_REF])).read_text(encoding="utf-8"))
    assert system == [{"type": "text", "content": "You are a helpful assistant."}]
    for path in base.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not [s for s in (SSN, CARD) if any(form in text for form in secret_forms(s))], path.name
    assert find_leaks(span_exporter.get_finished_spans(), [SSN, CARD]) == []


async def test_the_file_is_what_the_span_would_carry(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    await run(make_otel_hooks(content_upload=tmp_path, capture_content=True))
    for attrs in chats(span_exporter):
        for key in CONTENT_KEYS:
            assert local(str(attrs[f"{key}_ref"])).read_text(encoding="utf-8") == attrs[key], key


async def test_the_standard_variables_a_file_url_and_jsonl(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "upload")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", f"file://{tmp_path}")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_FORMAT", "jsonl")
    await run(make_otel_hooks())
    _, answer = chats(span_exporter)
    ref = str(answer[semconv.GEN_AI_INPUT_MESSAGES_REF])
    assert ref.startswith(f"file://{tmp_path}/") and ref.endswith("_inputs.jsonl")
    lines = local(ref).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["role"] for line in lines] == ["user", "assistant", "tool"]


@pytest.mark.parametrize(
    ("env", "option"),
    [
        pytest.param({"OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH": "{tmp}"}, None, id="base-path-without-the-hook"),
        pytest.param(
            {
                "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": "upload",
                "OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH": "{tmp}",
            },
            False,
            id="option-false-wins",
        ),
    ],
)
async def test_nothing_is_uploaded_unless_asked_for(
    env: dict[str, str],
    option: bool | None,
    make_otel_hooks: MakeHooks,
    span_exporter: InMemorySpanExporter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    await run(make_otel_hooks(content_upload=option))
    assert files(tmp_path) == []
    assert all(not (set(attrs) & set(REFS)) for attrs in chats(span_exporter))


async def test_a_failing_write_is_a_warning_without_content_and_the_agent_never_sees_it(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the directory should be", encoding="utf-8")
    caplog.set_level(logging.WARNING, logger="flowra_otel")
    assert await run(make_otel_hooks(content_upload=blocker / "content", capture_content=True)) == "Ada is on file."
    warnings = [r for r in caplog.records if r.name == "flowra_otel" and "could not write content" in r.getMessage()]
    assert warnings, "each failed write is logged"
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in warnings)
    call, _ = chats(span_exporter)
    content = [str(call[k]) for k in CONTENT_KEYS]  # what the files would have held
    for record in warnings:
        message = record.getMessage()
        assert "NotADirectoryError" in message or "FileExistsError" in message
        assert "Ada" not in message and all(text not in message for text in content)
    assert all(str(call[ref]).startswith(f"{blocker}/content/") for ref in REFS)  # the span still says where


async def test_references_go_on_the_details_event_too(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    await run(make_otel_hooks(content_upload=tmp_path, capture_content="event_only", logger_provider=logger_provider))
    for attrs, record in zip(chats(span_exporter), exporter.get_finished_logs(), strict=True):
        event = dict(record.log_record.attributes or {})
        assert {ref: event[ref] for ref in REFS} == {ref: attrs[ref] for ref in REFS}


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("gs://bucket/genai", ValueError, "need fsspec"),
        ("file://remote-host/dir", ValueError, "must name a local path"),
        ("   ", ValueError, "must not be empty"),
        (42, TypeError, "content_upload must be"),
    ],
)
def test_an_unusable_upload_target_fails_at_construction(
    value: object, error: type[Exception], match: str, make_otel_hooks: MakeHooks
) -> None:
    with pytest.raises(error, match=match):
        make_otel_hooks(content_upload=value)


def test_an_unusable_base_path_in_the_environment_warns_and_uploads_nothing(
    make_otel_hooks: MakeHooks, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "upload")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", "gs://bucket/genai")
    hooks = make_otel_hooks()
    assert hooks.options.content_upload is None and hooks.telemetry.uploader is None
    assert any("need fsspec" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


async def test_uploaded_content_is_private_to_its_user(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """Files 0600, the folders the upload creates 0700, under the usual umask (022) that gives
    world-readable files by default. The folder that already existed is left as it was."""
    base = tmp_path / "private" / "genai" / "content"
    before = mode(tmp_path)
    old_umask = os.umask(0o022)
    try:
        assert await run(make_otel_hooks(content_upload=base)) == "Ada is on file."
    finally:
        os.umask(old_umask)
    files = list(base.iterdir())
    assert len(files) == 6
    assert {oct(mode(p)) for p in files} == {oct(0o600)}
    for folder in (tmp_path / "private", tmp_path / "private" / "genai", base):
        assert oct(mode(folder)) == oct(0o700), folder
    assert mode(tmp_path) == before


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)
