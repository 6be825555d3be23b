"""``OtelHooks().install(runtime)`` on flowra 0.0.56+: once per runtime, only on a runtime, only on
a supported flowra, and nothing at all when tracing is off.

* installing the same ``OtelHooks`` twice traces once; a second, different one is refused
  (``ValueError``) and the first keeps its options;
* anything but an ``AgentRuntime`` is a ``TypeError``, as are the flowra 0.0.3 - 0.0.8 entry
  points (``register_hooks``, ``child_registry``), each naming what to call instead;
* a flowra outside 0.0.3 - 0.0.8 and 0.0.47 - 0.0.93 (or none) is ``UnsupportedFlowraError``
  naming the supported releases, raised before anything else;
* with no-op providers nothing is subscribed and flowra's ``emit`` is not patched.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flowra.agent import AgentRuntime
from flowra.agent.flow.hooks import HooksImpl
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from flowra_otel import OtelHooks, adapters
from flowra_otel.adapters import SUPPORTED, UnsupportedFlowraError, line_of
from flowra_otel.adapters.runtime_hooks import adapter as adapter_module
from flowra_otel.adapters.runtime_hooks import emit_patch
from flowra_otel.adapters.runtime_hooks.adapter import tracings_of
from flowra_otel.core import semconv
from tests import span_tree
from tests.runtime_hooks.conftest import SpanLedger, assert_all_ended
from tests.runtime_hooks.support import (
    FLOWRA_VERSION,
    ScriptedProvider,
    chat_runtime,
    get_weather,
    global_subscriptions,
    run_chat,
    text_response,
    tool_calls_response,
)

MakeHooks = Callable[..., OtelHooks]
SHAPE: list[Any] = [
    (
        "invoke_agent assistant",
        [("chat sonnet-4-5", []), ("execute_tool get_weather", []), ("chat sonnet-4-5", [])],
    )
]
UNSUPPORTED = ["0.0.2", "0.0.9", "0.0.30", "0.0.45", "0.0.46", "0.0.94", "0.1.0", "1.0.0", "not-a-version"]


def weather_runtime() -> AgentRuntime:
    provider = ScriptedProvider(
        tool_calls_response(("c1", "get_weather", {"city": "Oslo"})), text_response("Sunny in Oslo, it says.")
    )
    return chat_runtime(provider, get_weather)


async def run_weather(runtime: AgentRuntime) -> None:
    result = await run_chat(runtime, "Weather in Oslo?")
    assert result.response == "Sunny in Oslo, it says."


def shape(exporter: InMemorySpanExporter) -> list[Any]:
    return span_tree.shape(span_tree.build(exporter.get_finished_spans()))


def subscriptions(runtime: AgentRuntime) -> int:
    """Global event and span subscriptions on the runtime's hooks (a fresh runtime has none)."""
    return global_subscriptions(runtime.hooks)


def flowing_vars(runtime: AgentRuntime) -> int:
    return len(runtime.flowing._FlowingRegistry__entries)  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def emit_patch_as_it_was() -> Iterator[None]:
    """These tests take flowra's ``emit`` back (uninstrument, tracing off): put the process back
    as it was for the tests after them."""
    was = emit_patch.installed()
    yield
    if was:
        emit_patch.install()


# ------------------------------------------------------------------------------------ once per runtime
async def test_installing_the_same_hooks_twice_traces_once(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    otel = make_otel_hooks()
    runtime = weather_runtime()
    otel.install(runtime)
    after_first = (subscriptions(runtime), flowing_vars(runtime))
    otel.install(runtime)
    assert (subscriptions(runtime), flowing_vars(runtime)) == after_first
    assert [t.adapter for t in tracings_of(runtime)] == [otel._adapter]
    await run_weather(runtime)
    assert shape(span_exporter) == SHAPE
    assert_all_ended(ledger, span_exporter)


async def test_a_second_otel_hooks_on_the_same_runtime_is_refused(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, ledger: SpanLedger
) -> None:
    first = make_otel_hooks(capture_content=False)
    second = make_otel_hooks(capture_content=True)
    runtime = weather_runtime()
    first.install(runtime)
    with pytest.raises(ValueError, match=r"^another OtelHooks already traces this runtime; install one per runtime$"):
        second.install(runtime)
    assert [t.adapter for t in tracings_of(runtime)] == [first._adapter]
    await run_weather(runtime)
    assert shape(span_exporter) == SHAPE  # traced once, with the first one's options: no content
    for span in span_exporter.get_finished_spans():
        assert semconv.GEN_AI_TOOL_CALL_RESULT not in (span.attributes or {})
    assert_all_ended(ledger, span_exporter)
    # The refused one is still usable on another runtime.
    span_exporter.clear()
    other = weather_runtime()
    second.install(other)
    await run_weather(other)
    assert shape(span_exporter) == SHAPE


async def test_without_the_one_per_runtime_rule_a_run_is_traced_twice(
    make_otel_hooks: MakeHooks, span_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative check of the rule: with the adapter blind to the tracings already on the runtime,
    the second ``OtelHooks`` subscribes too and every agent, call and tool is traced twice."""
    monkeypatch.setattr(adapter_module, "tracings_of", lambda runtime: [])
    runtime = weather_runtime()
    make_otel_hooks().install(runtime)
    make_otel_hooks().install(runtime)
    await run_weather(runtime)
    (calls,) = SHAPE  # the second tracing's tree nests in the first's (its span is current)
    assert shape(span_exporter) == [("invoke_agent assistant", [calls, *calls[1]])]


# ------------------------------------------------------------------------------------ only on a runtime
@pytest.mark.parametrize(
    "target",
    [
        pytest.param(object, id="object"),
        pytest.param(lambda: None, id="none"),
        pytest.param(lambda: weather_runtime().hooks, id="the-runtimes-hooks"),
        pytest.param(lambda: AgentRuntime, id="the-class"),
        pytest.param(lambda: "runtime", id="str"),
    ],
)
def test_install_on_anything_but_a_runtime_is_a_type_error(
    target: Callable[[], Any], make_otel_hooks: MakeHooks
) -> None:
    with pytest.raises(TypeError, match=r"^flowra_otel cannot trace this runtime: missing AgentRuntime") as raised:
        make_otel_hooks().install(target())
    assert "(flowra 0.0.47 - 0.0.93 expected)" in str(raised.value)


def test_the_hook_registry_api_is_refused_with_what_to_call_instead(make_otel_hooks: MakeHooks) -> None:
    otel = make_otel_hooks()
    runtime = weather_runtime()
    with pytest.raises(TypeError) as raised:
        otel.register_hooks(runtime.hooks)
    assert str(raised.value) == (
        "register_hooks / hooks.add(...) is the flowra 0.0.3 - 0.0.8 API; "
        f"on flowra {FLOWRA_VERSION} use OtelHooks().install(runtime)"
    )
    with pytest.raises(TypeError) as raised:
        OtelHooks.child_registry(runtime.hooks, agent_path="planner")
    assert str(raised.value) == (
        f"child_registry is for flowra 0.0.3 - 0.0.8; on flowra {FLOWRA_VERSION} every "
        "agent of a runtime is traced after OtelHooks().install(runtime)"
    )
    assert subscriptions(runtime) == 0
    # the old line's one-liner is flowra's own error here (its hooks have no add), as the docs say
    with pytest.raises(AttributeError, match="object has no attribute 'add'"):
        runtime.hooks.add(otel)  # type: ignore[attr-defined]
    assert subscriptions(runtime) == 0


# ------------------------------------------------------------------------------------ only on a supported flowra
@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("0.0.3", "hook_registry"),
        ("0.0.8", "hook_registry"),
        ("0.0.47", "runtime_hooks"),
        ("0.0.49", "runtime_hooks"),
        ("0.0.55", "runtime_hooks"),
        ("0.0.56", "runtime_hooks"),
        ("0.0.67", "runtime_hooks"),
        ("0.0.68", "runtime_hooks"),
        ("0.0.85", "runtime_hooks"),
        ("0.0.86", "runtime_hooks"),
        ("0.0.90", "runtime_hooks"),
        ("0.0.93", "runtime_hooks"),
        ("0.0.93.post1", "runtime_hooks"),
        *[(version, None) for version in UNSUPPORTED],
    ],
)
def test_line_of_each_release(version: str, line: str | None) -> None:
    assert line_of(version) == line


@pytest.fixture
def installed_flowra(monkeypatch: pytest.MonkeyPatch) -> Callable[[str | None], None]:
    """Make ``importlib.metadata`` report ``version`` for flowra (None: not installed)."""
    real = importlib.metadata.version

    def pretend(version: str | None) -> None:
        def fake(name: str) -> str:
            if name != "flowra":
                return real(name)
            if version is None:
                raise importlib.metadata.PackageNotFoundError(name)
            return version

        monkeypatch.setattr(importlib.metadata, "version", fake)

    return pretend


@pytest.mark.parametrize("version", UNSUPPORTED)
def test_an_unsupported_flowra_names_the_supported_releases(
    version: str, installed_flowra: Callable[[str | None], None]
) -> None:
    installed_flowra(version)
    assert adapters.flowra_version() == version
    with pytest.raises(UnsupportedFlowraError) as raised:
        adapters.current()
    assert str(raised.value) == (
        f"flowra {version} is not supported by flowra_otel; supported: {SUPPORTED}. "
        "Install a supported flowra release, or a flowra_otel release that supports yours."
    )
    assert isinstance(raised.value, ImportError)  # what opentelemetry-instrument reports and skips
    # The facade checks flowra first: even bad options report the unsupported flowra.
    with pytest.raises(UnsupportedFlowraError, match=re.escape(f"flowra {version} is not supported")):
        OtelHooks(capture_content=3)  # type: ignore[arg-type]


def test_no_flowra_at_all_says_so(installed_flowra: Callable[[str | None], None]) -> None:
    installed_flowra(None)
    assert adapters.flowra_version() is None
    with pytest.raises(UnsupportedFlowraError) as raised:
        adapters.current()
    assert str(raised.value) == f"flowra_otel traces flowra agents, but flowra is not installed; supported: {SUPPORTED}"
    with pytest.raises(UnsupportedFlowraError, match="flowra is not installed"):
        OtelHooks()


@pytest.mark.parametrize("version", ["0.0.47", "0.0.55", "0.0.56", "0.0.86", "0.0.93"])
def test_a_supported_release_gets_this_line(version: str, installed_flowra: Callable[[str | None], None]) -> None:
    installed_flowra(version)
    line = adapters.current()
    assert line.__name__ == "flowra_otel.adapters.runtime_hooks"
    assert SUPPORTED == "flowra 0.0.3 - 0.0.8 (the HookRegistry API) and 0.0.47 - 0.0.93 (runtime.hooks)"


def test_the_zero_code_entry_point_on_an_unsupported_flowra_says_so_in_one_line(
    installed_flowra: Callable[[str | None], None], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No traceback from ``opentelemetry-instrument``: one warning, and nothing is instrumented
    (the real launcher on a real unsupported flowra: test_zero_code_on_an_unsupported_flowra.py)."""
    installed_flowra("0.0.94")
    monkeypatch.delitem(sys.modules, "flowra_otel.instrumentor", raising=False)
    module = importlib.import_module("flowra_otel.instrumentor")
    instrumentor = module.FlowraInstrumentor()
    instrumentor.instrument()
    instrumentor.instrument()
    warnings = [r.getMessage() for r in caplog.records if r.name == "flowra_otel"]
    assert len(warnings) == 1, warnings
    assert re.fullmatch(r"flowra_otel: flowra 0\.0\.94 is not supported .* The app runs untraced\.", warnings[0])
    assert not instrumentor.is_instrumented_by_opentelemetry
    assert "\n" not in warnings[0]


# ------------------------------------------------------------------------------------ tracing off
@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"tracer_provider": NoOpTracerProvider(), "meter_provider": NoOpMeterProvider()}, id="noop"),
        pytest.param({"tracer_provider": NoOpTracerProvider(), "metrics": False}, id="noop-tracer-no-metrics"),
    ],
)
async def test_tracing_off_installs_nothing_and_patches_nothing(options: dict[str, Any]) -> None:
    emit_patch.uninstall()  # earlier tests' OtelHooks patched it
    emit = HooksImpl.__dict__["emit"]
    otel = OtelHooks(**options)
    runtime = weather_runtime()
    before = (subscriptions(runtime), flowing_vars(runtime))
    otel.install(runtime)
    assert not emit_patch.installed()
    assert HooksImpl.__dict__["emit"] is emit
    assert (subscriptions(runtime), flowing_vars(runtime)) == before == (0, 0)
    await run_weather(runtime)


async def test_metrics_alone_still_install(meter_provider: MeterProvider, metric_reader: InMemoryMetricReader) -> None:
    """The paired positive: spans off but metrics on is not "off": the adapter subscribes, patches
    ``emit``, and the run's metrics are recorded."""
    emit_patch.uninstall()
    otel = OtelHooks(tracer_provider=NoOpTracerProvider(), meter_provider=meter_provider)
    runtime = weather_runtime()
    otel.install(runtime)
    assert emit_patch.installed()
    assert subscriptions(runtime) > 0 and flowing_vars(runtime) == 1
    await run_weather(runtime)
    data = metric_reader.get_metrics_data()
    assert data is not None
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= names
