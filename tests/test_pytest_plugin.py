"""The pytest plugin shipped in the package (``pytest11`` entry point ``flowra_otel``,
``flowra_otel/pytest_plugin.py``), run the way a user's project meets it: a test session of its own
(pytester, in a subprocess), in a folder with nothing of this repository's conftest.

- A session whose tests never ask for ``flowra_otel_capture`` pays nothing for it: the plugin is
  loaded, and neither flowra, the OpenTelemetry SDK nor the plugin's own tracing is imported, no
  global provider is set; ``-p no:flowra_otel`` leaves it out.
- A runtime shared by a module's tests is left as it was after each test that traced it with the
  fixture: the next test without the fixture runs it untraced, the next one with it installs again.
- A test that asks gets in-memory providers of its own (a second test sees nothing of the first's),
  the finished spans as SDK spans and as plain dicts for snapshot asserts, the log records and the
  metric points, and the global providers stay untouched.

That a user's redaction test written with it runs on both flowra lines, and fails when the hook is
missing, is the docs' own sample (docs/redaction.md section 7), run by
tests/both_lines/test_docs_samples_run.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")  # the user's own settings
    pytester.makepyfile(test_user=source)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_a_session_that_never_asks_for_the_fixture_imports_nothing_of_it(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import sys

        from opentelemetry import trace

        def test_plain():
            assert "flowra_otel.pytest_plugin" in sys.modules  # loaded, and idle
            loaded = [m for m in sys.modules if m == "flowra" or m.startswith(("flowra.", "opentelemetry.sdk"))]
            assert loaded == []
            ours = sorted(m for m in sys.modules if m.startswith("flowra_otel."))
            assert ours == ["flowra_otel.core", "flowra_otel.core.version", "flowra_otel.pytest_plugin"]
            assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
        """,
    )
    result.assert_outcomes(passed=1)


def test_the_fixture_is_listed_and_can_be_left_out(pytester: pytest.Pytester) -> None:
    listed = run(pytester, "def test_nothing():\n    pass\n", "--fixtures")
    listed.stdout.fnmatch_lines(["flowra_otel_capture -- *flowra_otel*pytest_plugin.py*"])
    left_out = run(pytester, "def test_uses(flowra_otel_capture):\n    pass\n", "-p", "no:flowra_otel")
    left_out.assert_outcomes(errors=1)
    left_out.stdout.fnmatch_lines(["*fixture 'flowra_otel_capture' not found*"])


def test_the_fixture_gives_spans_dicts_logs_and_metrics_of_its_test_alone(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        def record(capture):
            tracer = capture.tracer_provider.get_tracer("app")
            with tracer.start_as_current_span("invoke_agent assistant") as root:
                root.set_attribute("gen_ai.operation.name", "invoke_agent")
                with tracer.start_as_current_span("execute_tool lookup", kind=SpanKind.INTERNAL) as tool:
                    tool.set_attribute("gen_ai.tool.call.result", "SSN ***-**-6789")
                    tool.set_attribute("flowra.redaction.fields", ["result"])
                    tool.set_attribute("gen_ai.response.time_to_first_chunk", 0.123)
                    tool.add_event("retry", {"attempt": 2})
                    tool.set_status(Status(StatusCode.ERROR, "tool_error"))
            counter = capture.meter_provider.get_meter("app").create_counter("flowra.redactions")
            counter.add(1, {"gen_ai.tool.name": "lookup"})
            capture.logger_provider.get_logger("app").emit(body="details")

        def test_first(flowra_otel_capture):
            record(flowra_otel_capture)
            assert trace.get_tracer_provider() is not flowra_otel_capture.tracer_provider  # never global
            assert flowra_otel_capture.span_dicts() == [
                {
                    "name": "invoke_agent assistant", "kind": "INTERNAL", "span_id": 1, "parent_id": None,
                    "trace_id": 1, "attributes": {"gen_ai.operation.name": "invoke_agent"},
                    "status": {"code": "UNSET", "description": None}, "events": [], "links": [],
                },
                {
                    "name": "execute_tool lookup", "kind": "INTERNAL", "span_id": 2, "parent_id": 1,
                    "trace_id": 1,
                    "attributes": {
                        "gen_ai.tool.call.result": "SSN ***-**-6789",
                        "flowra.redaction.fields": ["result"],
                        "gen_ai.response.time_to_first_chunk": "<varies>",
                    },
                    "status": {"code": "ERROR", "description": "tool_error"},
                    "events": [{"name": "retry", "attributes": {"attempt": 2}}], "links": [],
                },
            ]
            assert flowra_otel_capture.span("execute_tool lookup").status.description == "tool_error"
            flowra_otel_capture.assert_no_leak(["123-45-6789"])
            (point,) = flowra_otel_capture.metric_points("flowra.redactions")
            assert point.value == 1 and dict(point.attributes) == {"gen_ai.tool.name": "lookup"}
            (log,) = flowra_otel_capture.logs
            assert log.log_record.body == "details"

        def test_second_sees_nothing_of_the_first(flowra_otel_capture):
            assert flowra_otel_capture.spans == () and flowra_otel_capture.logs == ()
            assert flowra_otel_capture.metric_points("flowra.redactions") == []

        def test_a_leak_fails_the_users_test(flowra_otel_capture):
            with flowra_otel_capture.tracer_provider.get_tracer("app").start_as_current_span("execute_tool x") as span:
                span.set_attribute("gen_ai.tool.call.result", "SSN 123-45-6789")
            flowra_otel_capture.assert_no_leak(["123-45-6789"])
        """,
    )
    result.assert_outcomes(passed=2, failed=1)
    # the failure names the place and the secret by position, shortened: the CI log does not repeat it
    result.stdout.fnmatch_lines(["*attribute gen_ai.tool.call.result contains secret #0 ('123-…', 11 chars)*"])


SHARED_RUNTIME = """
    import asyncio
    import logging

    from tests.both_lines.line import S  # the installed flowra line's scripted runtime

    runtime = asyncio.run(S.kept_runtime(S.answer("One."), S.answer("Two."), S.answer("Three.")))
    FLOWRAS_OWN = S.handler_storage(runtime)

    def run_once():
        asyncio.run(S.kept_run(runtime))

    def agent_spans(capture):
        return [s.name for s in capture.spans if s.name.startswith("invoke_agent")]

    def test_first_traces_it(flowra_otel_capture):
        flowra_otel_capture.install(runtime)
        run_once()
        assert len(agent_spans(flowra_otel_capture)) == 1

    def test_second_runs_it_untraced(caplog):
        caplog.set_level(logging.DEBUG)
        run_once()
        shut_down = [r.getMessage() for r in caplog.records if "already shutdown" in r.getMessage().lower()]
        assert shut_down == []
        assert S.handler_storage(runtime) == FLOWRAS_OWN

    def test_third_traces_it_again(flowra_otel_capture):
        flowra_otel_capture.install(runtime)  # the first test's OtelHooks no longer holds it
        run_once()
        assert len(agent_spans(flowra_otel_capture)) == 1
    """


def test_a_runtime_shared_by_tests_is_left_as_it_was(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixture's teardown uninstalls what its ``install`` did: a later test without the fixture
    runs the shared runtime untraced (no run into the shut-down providers, no "already shutdown"
    log), and the next test's ``install`` is not refused as a second ``OtelHooks``."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the user's module imports this suite's scripted runtime
    result = run(pytester, textwrap.dedent(SHARED_RUNTIME))
    result.assert_outcomes(passed=3)
    assert "already shutdown" not in (result.stdout.str() + result.stderr.str()).lower()
