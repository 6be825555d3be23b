"""ConsoleTreeExporter, driven by real SDK spans with fixed ids and timestamps.

Fixed ids (a sequential ``IdGenerator``) and explicit start/end times make the rendered text
exact, durations included, so every test compares whole output rather than fragments.
"""

from __future__ import annotations

import io
import itertools
import logging
import threading
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from flowra_otel.core.console import DEFAULT_ATTRIBUTES, ConsoleTreeExporter, format_duration_ms

T0 = 1_700_000_000_000_000_000
"""An arbitrary epoch in nanoseconds; every span time is T0 + some milliseconds."""

REMOTE_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
REMOTE_PARENT = f"00-{REMOTE_TRACE_ID}-00f067aa0ba902b7-01"


def ms(n: float) -> int:
    return T0 + int(n * 1_000_000)


class SequentialIds(IdGenerator):
    """Trace ids 1, 2, 3 ... and span ids 1, 2, 3 ...: stable headers in the expected text."""

    def __init__(self) -> None:
        self._trace_ids = itertools.count(1)
        self._span_ids = itertools.count(1)

    def generate_trace_id(self) -> int:
        return next(self._trace_ids)

    def generate_span_id(self) -> int:
        return next(self._span_ids)


class TtyStringIO(io.StringIO):
    """A StringIO that says it is a terminal, to exercise automatic colour."""

    def isatty(self) -> bool:
        return True


def trace_header(n: int) -> str:
    return f"trace {n:032x}"


@pytest.fixture
def out() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def exporter(out: io.StringIO) -> ConsoleTreeExporter:
    return ConsoleTreeExporter(out)


@pytest.fixture
def provider(exporter: ConsoleTreeExporter) -> Iterator[TracerProvider]:
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()


@pytest.fixture
def tracer(provider: TracerProvider) -> trace.Tracer:
    return provider.get_tracer("test")


def record_agent_run(tracer: trace.Tracer) -> None:
    """An agent run: a chat, two parallel tools (one nested call, one timeout), a sub-agent.

    Spans end in the order a real run ends them, children first; the two parallel tools end
    in the reverse of their start order, so only start-time sorting gets them right.
    """
    root = tracer.start_span(
        "invoke_agent support_bot",
        start_time=ms(0),
        attributes={"gen_ai.agent.name": "support_bot", "gen_ai.provider.name": "anthropic"},
    )
    in_root = trace.set_span_in_context(root)
    chat = tracer.start_span(
        "chat claude-sonnet-4-5",
        context=in_root,
        start_time=ms(1),
        attributes={
            "gen_ai.provider.name": "anthropic",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 40,
            "gen_ai.response.finish_reasons": ("tool_call",),
        },
    )
    chat.end(end_time=ms(801))
    weather = tracer.start_span(
        "execute_tool get_weather", context=in_root, start_time=ms(802), attributes={"gen_ai.tool.call.id": "toolu_01"}
    )
    clock = tracer.start_span(
        "execute_tool get_time",
        context=in_root,
        start_time=ms(803),
        attributes={"gen_ai.tool.call.id": "toolu_02", "error.type": "TimeoutError"},
    )
    http = tracer.start_span("GET api.weather.example", context=trace.set_span_in_context(weather), start_time=ms(810))
    clock.set_status(Status(StatusCode.ERROR, "tool timed out"))
    clock.end(end_time=ms(953))
    http.end(end_time=ms(990))
    weather.end(end_time=ms(1012))
    expert = tracer.start_span(
        "execute_tool ask_expert", context=in_root, start_time=ms(1013), attributes={"gen_ai.tool.call.id": "toolu_03"}
    )
    sub_agent = tracer.start_span(
        "invoke_agent expert",
        context=trace.set_span_in_context(expert),
        start_time=ms(1014),
        attributes={"flowra.end_reason": "timed_out", "flowra.tool_loop.status": "max_iterations"},
    )
    sub_chat = tracer.start_span(
        "chat claude-haiku-4-5",
        context=trace.set_span_in_context(sub_agent),
        start_time=ms(1015),
        attributes={"gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 7, "flowra.redaction.applied": True},
    )
    sub_chat.end(end_time=ms(1415))
    sub_agent.end(end_time=ms(1500))
    expert.end(end_time=ms(1501))
    root.end(end_time=ms(1530))


AGENT_RUN_TREE = """\
trace 00000000000000000000000000000001
invoke_agent support_bot  1530.0 ms  provider=anthropic
├─ chat claude-sonnet-4-5  800.0 ms  provider=anthropic in_tokens=120 out_tokens=40 finish=tool_call
├─ execute_tool get_weather  210.0 ms  call_id=toolu_01
│  └─ GET api.weather.example  180.0 ms
├─ execute_tool get_time  150.0 ms  ✗ error.type=TimeoutError  call_id=toolu_02
└─ execute_tool ask_expert  488.0 ms  call_id=toolu_03
   └─ invoke_agent expert  486.0 ms  end_reason=timed_out loop_status=max_iterations
      └─ chat claude-haiku-4-5  400.0 ms  in_tokens=30 out_tokens=7 redacted=true

"""


def test_agent_run_renders_as_one_tree(tracer: trace.Tracer, out: io.StringIO) -> None:
    record_agent_run(tracer)

    assert out.getvalue() == AGENT_RUN_TREE


def test_nothing_is_printed_before_the_top_span_ends(tracer: trace.Tracer, out: io.StringIO) -> None:
    root = tracer.start_span("invoke_agent a", start_time=ms(0))
    child = tracer.start_span("chat m", context=trace.set_span_in_context(root), start_time=ms(1))
    child.end(end_time=ms(2))

    assert out.getvalue() == ""

    root.end(end_time=ms(3))

    assert out.getvalue() == f"{trace_header(1)}\ninvoke_agent a  3.0 ms\n└─ chat m  1.0 ms\n\n"


def test_duration_format_option(provider: TracerProvider) -> None:
    out = io.StringIO()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(out, duration_format=lambda ns: "<d>")))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent a"), tracer.start_as_current_span("chat m"):
        pass

    assert out.getvalue() == f"{trace_header(1)}\ninvoke_agent a  <d>\n└─ chat m  <d>\n\n"


def test_format_duration_ms() -> None:
    assert format_duration_ms(0) == "0.0 ms"
    assert format_duration_ms(1_234_567) == "1.2 ms"
    assert format_duration_ms(61_000_000_000) == "61000.0 ms"


def test_span_with_a_remote_parent_from_the_caller_prints_when_it_ends(tracer: trace.Tracer, out: io.StringIO) -> None:
    caller = TraceContextTextMapPropagator().extract({"traceparent": REMOTE_PARENT})
    agent = tracer.start_span("invoke_agent a", context=caller, start_time=ms(0))
    chat = tracer.start_span("chat m", context=trace.set_span_in_context(agent), start_time=ms(1))
    chat.end(end_time=ms(11))

    assert out.getvalue() == ""

    agent.end(end_time=ms(20))

    assert out.getvalue() == f"trace {REMOTE_TRACE_ID}\ninvoke_agent a  20.0 ms\n└─ chat m  10.0 ms\n\n"


def test_exported_caller_span_is_the_top_and_the_trace_prints_once(tracer: trace.Tracer, out: io.StringIO) -> None:
    """An HTTP server span around the agent is exported too: the agent waits for it."""
    caller = TraceContextTextMapPropagator().extract({"traceparent": REMOTE_PARENT})
    request = tracer.start_span("POST /chat", context=caller, kind=trace.SpanKind.SERVER, start_time=ms(0))
    agent = tracer.start_span("invoke_agent a", context=trace.set_span_in_context(request), start_time=ms(2))
    chat = tracer.start_span("chat m", context=trace.set_span_in_context(agent), start_time=ms(3))
    chat.end(end_time=ms(13))
    agent.end(end_time=ms(14))

    assert out.getvalue() == ""

    request.end(end_time=ms(15))

    assert out.getvalue() == (
        f"trace {REMOTE_TRACE_ID}\nPOST /chat  15.0 ms\n└─ invoke_agent a  12.0 ms\n   └─ chat m  10.0 ms\n\n"
    )


def test_two_runs_under_one_remote_caller_print_separately(tracer: trace.Tracer, out: io.StringIO) -> None:
    """Same trace, two local tops: the first to end must not take the other's children."""
    caller = TraceContextTextMapPropagator().extract({"traceparent": REMOTE_PARENT})
    first = tracer.start_span("invoke_agent first", context=caller, start_time=ms(0))
    second = tracer.start_span("invoke_agent second", context=caller, start_time=ms(1))
    second_chat = tracer.start_span("chat second", context=trace.set_span_in_context(second), start_time=ms(2))
    first_chat = tracer.start_span("chat first", context=trace.set_span_in_context(first), start_time=ms(3))
    second_chat.end(end_time=ms(5))
    first_chat.end(end_time=ms(6))
    first.end(end_time=ms(7))
    second.end(end_time=ms(8))

    assert out.getvalue() == (
        f"trace {REMOTE_TRACE_ID}\ninvoke_agent first  7.0 ms\n└─ chat first  3.0 ms\n\n"
        f"trace {REMOTE_TRACE_ID}\ninvoke_agent second  7.0 ms\n└─ chat second  3.0 ms\n\n"
    )


def recorded_agent_run_spans() -> tuple[ReadableSpan, ...]:
    memory = InMemorySpanExporter()
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(memory))
    record_agent_run(tp.get_tracer("test"))
    tp.shutdown()
    return memory.get_finished_spans()


@pytest.mark.parametrize("batch_size", [1, 2, 3, 9])
def test_spans_split_over_several_export_calls(out: io.StringIO, batch_size: int) -> None:
    spans = recorded_agent_run_spans()
    exporter = ConsoleTreeExporter(out)

    for start in range(0, len(spans), batch_size):
        assert exporter.export(spans[start : start + batch_size]) is SpanExportResult.SUCCESS

    assert out.getvalue() == AGENT_RUN_TREE


def test_through_a_batch_span_processor(out: io.StringIO) -> None:
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    tp.add_span_processor(BatchSpanProcessor(ConsoleTreeExporter(out), max_export_batch_size=2))
    record_agent_run(tp.get_tracer("test"))

    assert tp.force_flush()
    assert out.getvalue() == AGENT_RUN_TREE
    tp.shutdown()
    assert out.getvalue() == AGENT_RUN_TREE


def test_child_that_outlives_its_parent_prints_as_a_continuation(tracer: trace.Tracer, out: io.StringIO) -> None:
    root = tracer.start_span("invoke_agent a", start_time=ms(0))
    background = tracer.start_span("execute_tool slow", context=trace.set_span_in_context(root), start_time=ms(1))
    nested = tracer.start_span("GET x", context=trace.set_span_in_context(background), start_time=ms(2))
    nested.end(end_time=ms(4))
    root.end(end_time=ms(5))
    background.end(end_time=ms(9))

    assert out.getvalue() == (
        f"{trace_header(1)}\ninvoke_agent a  5.0 ms\n\n"
        f"{trace_header(1)} (continued)\nexecute_tool slow  8.0 ms\n└─ GET x  2.0 ms\n\n"
    )


def test_error_type_falls_back_to_the_recorded_exception(provider: TracerProvider) -> None:
    out = io.StringIO()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(out, duration_format=lambda ns: "<d>")))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent a"):
        with pytest.raises(ValueError, match="bad"), tracer.start_as_current_span("execute_tool t"):
            raise ValueError("bad")
        failed = tracer.start_span("chat m")
        failed.set_status(Status(StatusCode.ERROR, "overloaded"))
        failed.end()
        unknown = tracer.start_span("chat n")
        unknown.set_status(Status(StatusCode.ERROR))
        unknown.end()

    assert out.getvalue() == (
        f"{trace_header(1)}\n"
        "invoke_agent a  <d>\n"
        "├─ execute_tool t  <d>  ✗ error.type=ValueError\n"
        "├─ chat m  <d>  ✗ ERROR: overloaded\n"
        "└─ chat n  <d>  ✗ ERROR\n\n"
    )


def test_shutdown_prints_incomplete_traces_instead_of_dropping_them(
    provider: TracerProvider, tracer: trace.Tracer, out: io.StringIO
) -> None:
    never_ends = tracer.start_span("invoke_agent a", start_time=ms(0))
    in_root = trace.set_span_in_context(never_ends)
    tracer.start_span("chat m", context=in_root, start_time=ms(1)).end(end_time=ms(3))
    tracer.start_span("execute_tool t", context=in_root, start_time=ms(4)).end(end_time=ms(5))

    assert out.getvalue() == ""

    provider.shutdown()

    assert out.getvalue() == f"{trace_header(1)} (incomplete)\nchat m  2.0 ms\nexecute_tool t  1.0 ms\n\n"


def test_after_shutdown(exporter: ConsoleTreeExporter, out: io.StringIO, caplog: pytest.LogCaptureFixture) -> None:
    spans = recorded_agent_run_spans()
    exporter.shutdown()
    exporter.shutdown()  # idempotent

    assert exporter.force_flush() is True
    assert exporter.export(spans) is SpanExportResult.FAILURE
    assert "already shut down" in caplog.text
    assert out.getvalue() == ""


def test_attributes_option_and_value_formatting(out: io.StringIO) -> None:
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(out, attributes=["k.list", "k.bool", "k.text"])))
    tp.add_span_processor(
        SimpleSpanProcessor(ConsoleTreeExporter(out, attributes={"k.float": "f", "k.missing": "m", "k.long": "long"}))
    )
    span = tp.get_tracer("test").start_span(
        "s",
        start_time=ms(0),
        attributes={
            "k.list": ["stop", "length"],
            "k.bool": False,
            "k.text": "two\nlines",
            "k.float": 0.25,
            "k.long": "x" * 60,
            "gen_ai.provider.name": "not shown: not in the list",
        },
    )
    span.end(end_time=ms(1))
    tp.shutdown()

    assert out.getvalue() == (
        f"{trace_header(1)}\ns  1.0 ms  k.list=stop,length k.bool=false k.text=two\\nlines\n\n"
        f"{trace_header(1)}\ns  1.0 ms  f=0.25 long={'x' * 47}…\n\n"
    )


def test_default_attributes_do_not_repeat_the_span_name() -> None:
    assert "gen_ai.agent.name" not in DEFAULT_ATTRIBUTES
    assert "gen_ai.request.model" not in DEFAULT_ATTRIBUTES
    assert "gen_ai.tool.name" not in DEFAULT_ATTRIBUTES


def test_colour_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    plain, tty, forced, no_color_tty = io.StringIO(), TtyStringIO(), io.StringIO(), TtyStringIO()
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    for exporter in (
        ConsoleTreeExporter(plain),
        ConsoleTreeExporter(tty),
        ConsoleTreeExporter(forced, color=True),
        ConsoleTreeExporter(no_color_tty, color=False),
    ):
        tp.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = tp.get_tracer("test")
    root = tracer.start_span("invoke_agent a", start_time=ms(0))
    failed = tracer.start_span("execute_tool t", context=trace.set_span_in_context(root), start_time=ms(1))
    failed.set_status(Status(StatusCode.ERROR))
    failed.end(end_time=ms(2))
    root.end(end_time=ms(3))
    tp.shutdown()

    assert "\x1b[" not in plain.getvalue()
    assert "\x1b[" not in no_color_tty.getvalue()
    assert tty.getvalue() == forced.getvalue()
    assert tty.getvalue() == (
        f"\x1b[2m{trace_header(1)}\x1b[0m\n"
        "\x1b[1minvoke_agent a\x1b[0m  \x1b[36m3.0 ms\x1b[0m\n"
        "\x1b[2m└─ \x1b[0mexecute_tool t  \x1b[36m1.0 ms\x1b[0m  \x1b[1;31m✗ ERROR\x1b[0m\n\n"
    )


def test_no_color_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    tty = TtyStringIO()
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(tty)))
    tp.get_tracer("test").start_span("s").end()
    tp.shutdown()

    assert tty.getvalue().startswith("trace ")
    assert "\x1b[" not in tty.getvalue()


def test_ascii_guides_when_the_stream_cannot_encode_box_drawing() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(stream)))
    tracer = tp.get_tracer("test")
    root = tracer.start_span("a", start_time=ms(0))
    in_root = trace.set_span_in_context(root)
    first = tracer.start_span("b", context=in_root, start_time=ms(1))
    tracer.start_span("c", context=trace.set_span_in_context(first), start_time=ms(2)).end(end_time=ms(3))
    first.end(end_time=ms(4))
    failed = tracer.start_span("d", context=in_root, start_time=ms(5))
    failed.set_status(Status(StatusCode.ERROR))
    failed.end(end_time=ms(6))
    root.end(end_time=ms(7))
    tp.shutdown()

    assert raw.getvalue().decode("ascii") == (
        f"{trace_header(1)}\na  7.0 ms\n|- b  3.0 ms\n|  `- c  1.0 ms\n`- d  1.0 ms  x ERROR\n\n"
    )


def test_default_stream_is_stdout_at_write_time(capsys: pytest.CaptureFixture[str]) -> None:
    exporter = ConsoleTreeExporter()
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    tp.get_tracer("test").start_span("s", start_time=ms(0)).end(end_time=ms(1))
    tp.shutdown()

    assert capsys.readouterr().out == f"{trace_header(1)}\ns  1.0 ms\n\n"


def test_too_many_waiting_traces_drops_the_oldest_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    exporter = ConsoleTreeExporter(out, max_traces=2)
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = tp.get_tracer("test")
    roots = [tracer.start_span(f"root {n}", start_time=ms(0)) for n in range(4)]
    for n, root in enumerate(roots):
        tracer.start_span(f"child {n}", context=trace.set_span_in_context(root), start_time=ms(1)).end(end_time=ms(2))
    for root in roots[2:]:
        root.end(end_time=ms(3))

    warnings = [r for r in caplog.records if r.name == "flowra_otel.console" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "more than 2 traces" in warnings[0].getMessage()
    assert out.getvalue() == (
        f"{trace_header(3)}\nroot 2  3.0 ms\n└─ child 2  1.0 ms\n\n"
        f"{trace_header(4)}\nroot 3  3.0 ms\n└─ child 3  1.0 ms\n\n"
    )
    tp.shutdown()


def test_too_many_spans_in_one_trace_drops_the_excess_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    tp = TracerProvider(id_generator=SequentialIds(), shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(out, max_spans_per_trace=2)))
    tracer = tp.get_tracer("test")
    root = tracer.start_span("root", start_time=ms(0))
    for n in range(5):
        tracer.start_span(f"child {n}", context=trace.set_span_in_context(root), start_time=ms(n)).end(end_time=ms(n))
    root.end(end_time=ms(9))
    tp.shutdown()

    warnings = [r for r in caplog.records if r.name == "flowra_otel.console" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "more than 2 spans" in warnings[0].getMessage()
    assert out.getvalue() == (
        f"{trace_header(1)} (3 spans dropped)\nroot  9.0 ms\n├─ child 0  0.0 ms\n└─ child 1  0.0 ms\n\n"
    )


def test_invalid_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ConsoleTreeExporter(max_traces=0)


def test_concurrent_traces_are_printed_whole(out: io.StringIO) -> None:
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter(out)))
    tracer = tp.get_tracer("test")
    threads_n, runs_n, children_n = 8, 25, 3
    barrier = threading.Barrier(threads_n)

    def work(worker: int) -> None:
        barrier.wait()
        for run in range(runs_n):
            with tracer.start_as_current_span(f"invoke_agent w{worker}r{run}"):
                for child in range(children_n):
                    with tracer.start_as_current_span(f"chat w{worker}r{run}c{child}"):
                        pass

    threads = [threading.Thread(target=work, args=(n,)) for n in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tp.shutdown()

    blocks = out.getvalue().split("\n\n")
    assert blocks.pop() == ""
    assert len(blocks) == threads_n * runs_n
    for block in blocks:
        header, root, *children = block.split("\n")
        assert header.startswith("trace ")
        run = root.split()[1]
        assert [line.split()[2] for line in children] == [f"{run}c{c}" for c in range(children_n)]


def test_a_span_claiming_to_be_its_own_parent_does_not_hang(out: io.StringIO) -> None:
    """Malformed input from some other instrumentation must not loop the exporter forever."""
    context = trace.SpanContext(trace_id=7, span_id=7, is_remote=False, trace_flags=trace.TraceFlags(1))
    selfish = ReadableSpan(name="selfish", context=context, parent=context, start_time=ms(0), end_time=ms(1))
    exporter = ConsoleTreeExporter(out)

    assert exporter.export([selfish]) is SpanExportResult.SUCCESS
    exporter.shutdown()

    assert out.getvalue() == f"{trace_header(7)} (incomplete)\nselfish  1.0 ms\n\n"
