"""``OtelHooks.install(runtime)`` returns an ``Installation``; its ``uninstall()`` takes the tracing
off the runtime again, on both flowra lines:

* the runtime's handler storage is what flowra would hold without the plugin (the app's own hooks
  where they were, no entry list the plugin's subscriptions made), so a run after it makes no
  span, the app's own hooks still run, and another ``OtelHooks`` may install;
* idempotent, and a spent handle never undoes a later install of the same ``OtelHooks``;
* while the runtime runs (where flowra tells: 0.0.49+) it is a ``RuntimeError`` and nothing is
  removed: the run is traced to its end.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from flowra_otel.hooks import Installation
from tests.both_lines.line import MakeHooks, S


def agent_spans(exporter: InMemorySpanExporter) -> int:
    return sum(1 for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent"))


async def test_after_uninstall_runs_are_untraced_and_the_storage_is_flowras_own(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    runtime = await S.kept_runtime(S.answer("One."), S.answer("Two."), S.answer("Three."))
    seen: list[object] = []
    S.on_message_accepted(runtime, seen.append)  # the app's own hook, on an event the plugin subscribes to as well
    before = S.handler_storage(runtime)

    installation = make_otel_hooks().install(runtime)
    assert isinstance(installation, Installation)
    installed = [installation.installed]
    await S.kept_run(runtime)
    assert agent_spans(span_exporter) == 1

    installation.uninstall()
    installed.append(installation.installed)
    assert installed == [True, False]
    assert S.handler_storage(runtime) == before  # no subscription of ours, no entry list made for one
    await S.kept_run(runtime)
    assert agent_spans(span_exporter) == 1  # that run made no span
    assert len(seen) == 2  # the app's hook ran both times

    make_otel_hooks().install(runtime)  # another OtelHooks is not refused
    await S.kept_run(runtime)
    assert agent_spans(span_exporter) == 2


async def test_uninstall_is_idempotent_and_a_spent_handle_leaves_a_later_install_alone(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    runtime = await S.kept_runtime(S.answer("One."))
    before = S.handler_storage(runtime)
    otel = make_otel_hooks()
    first = otel.install(runtime)
    first.uninstall()
    first.uninstall()
    assert S.handler_storage(runtime) == before

    second = otel.install(runtime)
    first.uninstall()  # spent: the second install stays
    await S.kept_run(runtime)
    assert agent_spans(span_exporter) == 1
    second.uninstall()
    assert S.handler_storage(runtime) == before


@pytest.mark.skipif(not S.TELLS_A_RUN, reason="flowra 0.0.49 - 0.0.93 tell a running runtime")
async def test_uninstall_during_a_run_is_refused_and_the_run_is_traced_to_its_end(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter
) -> None:
    runtime = await S.kept_runtime(S.answer("One."))
    installation = make_otel_hooks().install(runtime)
    refused: list[BaseException] = []

    def uninstall_now(event: object) -> None:
        try:
            installation.uninstall()
        except RuntimeError as exc:
            refused.append(exc)

    S.on_message_accepted(runtime, uninstall_now)
    await S.kept_run(runtime)
    assert [str(e) for e in refused] == [
        "cannot uninstall OtelHooks from a runtime while it runs; uninstall between runs"
    ]
    assert installation.installed
    names = sorted(s.name for s in span_exporter.get_finished_spans())  # exported: ended
    assert names == ["chat " + names[0].split(" ", 1)[1], "invoke_agent " + names[1].split(" ", 1)[1]]
