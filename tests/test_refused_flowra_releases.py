"""On a flowra release this package refuses, nothing of it touches flowra, and the app runs as without it.

Runs on a refused release (``./dev test`` installs 0.0.9, 0.0.47 and 0.0.50 into its sweep
environment: 0.0.47 - 0.0.55 keep their handlers in another storage, where a patched ``emit``
would fail every run of the app; 0.0.9 has yet another API); on a supported release every test
here skips, saying so. Checked:

* ``OtelHooks()``, ``OtelHooks().install`` and the zero-code entry point raise
  ``UnsupportedFlowraError`` naming the supported ranges and the installed release;
* ``HooksImpl.emit`` (where flowra has it) is still flowra's own, and no adapter was imported;
* the second line of defence: the modern adapter's emit patch, reached past the gate, refuses to
  patch this storage (``TypeError``) and leaves ``emit`` alone;
* the app's run gives the same result before and after the refused set-up.
"""

import dataclasses
import importlib
import sys
from typing import Any

import pytest

from flowra_otel import OtelHooks, adapters
from flowra_otel.adapters import SUPPORTED, UnsupportedFlowraError

VERSION = adapters.flowra_version() or "none"
pytestmark = pytest.mark.skipif(
    adapters.flowra_version() is None or adapters.line_of(VERSION) is not None,
    reason=f"runs on a refused flowra release (0.0.9, 0.0.47, 0.0.50 in ./dev test); installed: flowra {VERSION}",
)


def hooks_impl() -> Any:
    """flowra's ``HooksImpl`` (0.0.47+), or None on a release without it."""
    try:
        return importlib.import_module("flowra.agent.flow.hooks").HooksImpl
    except (ImportError, AttributeError):
        return None


def flowras_own_emit() -> bool:
    """``HooksImpl.emit`` is the function flowra defined (not a wrapper of ours); True without one."""
    impl = hooks_impl()
    if impl is None:
        return True
    emit = impl.__dict__["emit"]
    return emit.__module__ == "flowra.agent.flow.hooks" and not hasattr(emit, "__wrapped__")


@dataclasses.dataclass(frozen=True)
class Greeting:
    text: str


def app_runtime() -> tuple[Any, Any]:
    """A small app of this release: one agent whose step answers from its spec."""
    agent_module: Any = importlib.import_module("flowra.agent")  # its shape differs by release
    base: Any = agent_module.Agent[Greeting, Greeting]
    step: Any = agent_module.step
    try:
        runtime_class = importlib.import_module("flowra.agent").AgentRuntime
    except AttributeError:  # 0.0.9 - 0.0.10: the runtime has a package of its own
        runtime_class = importlib.import_module("flowra.runtime").AgentRuntime

    class Greeter(base):  # type: ignore[misc]
        @step("greet", entry=True)  # type: ignore[untyped-decorator]
        async def greet(self, spec: Greeting) -> Greeting:
            return Greeting(f"hello {spec.text}")

    return runtime_class(agents={"greeter": Greeter}), Greeter


async def run_app() -> Any:
    runtime, greeter = app_runtime()
    return runtime, await runtime.run(agent=greeter, spec=Greeting("Ada"))


async def test_a_refused_release_gets_the_clear_error_and_its_runs_are_untouched() -> None:
    _, before = await run_app()
    assert before == Greeting("hello Ada")
    expected = f"flowra {VERSION} is not supported by flowra_otel; supported: {SUPPORTED}."
    assert "0.0.56 - 0.0.93" in SUPPORTED and "0.0.3 - 0.0.8" in SUPPORTED
    with pytest.raises(UnsupportedFlowraError) as raised:
        OtelHooks()
    assert str(raised.value).startswith(expected)
    runtime, _ = await run_app()
    with pytest.raises(UnsupportedFlowraError, match=f"flowra {VERSION} is not supported"):
        OtelHooks().install(runtime)
    sys.modules.pop("flowra_otel.instrumentor", None)
    # zero-code: the entry point's instrumentor says so in one line and instruments nothing
    instrumentor = importlib.import_module("flowra_otel.instrumentor").FlowraInstrumentor
    assert instrumentor is importlib.import_module("flowra_otel.instrumentor").UnsupportedFlowraInstrumentor
    instrumentor().instrument()
    assert not instrumentor().is_instrumented_by_opentelemetry

    # nothing of the package touched flowra: no adapter imported, emit is flowra's own
    assert not [name for name in sys.modules if name.startswith("flowra_otel.adapters.")]
    assert flowras_own_emit()
    _, after = await run_app()
    assert after == before


async def test_the_emit_patch_refuses_a_handler_storage_it_does_not_read() -> None:
    """Reached past the gate (as a widened range once did), the modern adapter's emit patch
    verifies the storage before it patches: 0.0.47 - 0.0.55 are refused, emit stays flowra's."""
    if hooks_impl() is None:
        pytest.skip(f"flowra {VERSION} has no HooksImpl: nothing the emit patch could patch")
    try:
        emit_patch = importlib.import_module("flowra_otel.adapters.runtime_hooks.emit_patch")
    except ImportError:  # the adapter's own imports already refuse this release
        assert flowras_own_emit()
        return
    try:
        with pytest.raises(TypeError, match="flowra_otel cannot trace this flowra: its HooksImpl lacks"):
            emit_patch.install()
        assert not emit_patch.installed()
        assert flowras_own_emit()
        _, result = await run_app()
        assert result == Greeting("hello Ada")
    finally:
        emit_patch.uninstall()
        for name in [n for n in sys.modules if n.startswith("flowra_otel.adapters.")]:
            del sys.modules[name]
