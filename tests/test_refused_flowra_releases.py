"""On a flowra release this package refuses, nothing of it touches flowra, and the app runs as without it.

Runs on releases of the hook-API eras the package does not serve (``./dev test`` installs 0.0.9,
0.0.30, 0.0.45 and 0.0.46 into its sweep environment: ``HookRegistry`` without providers, then
``HookSubscription`` / ``HookEmitter`` with ``ToolLoopAgent`` and with ``TurnAgent``, the era just
before 0.0.47; 0.0.31 and 0.0.32 are yanked); on a supported release every test here skips,
saying so. Checked on each:

* ``OtelHooks()``, ``OtelHooks().install`` and the zero-code entry point raise
  ``UnsupportedFlowraError`` naming the supported ranges and the installed release;
* flowra's hook classes (``HookRegistry``, ``HookEmitter``...) are still flowra's own, and no
  adapter was imported;
* the second line of defence: the modern adapter, reached past the gate, does not take hold of
  this release (its imports fail, or its emit patch refuses the handler storage) and patches
  nothing;
* the app's run gives the same result before and after the refused set-up.

(A supported release whose handler storage is neither known one: ``tests/runtime_hooks/
test_an_unknown_handler_storage_is_refused.py``.)
"""

import dataclasses
import importlib
import sys
from typing import Any

import pytest

from flowra_otel import OtelHooks, adapters
from flowra_otel.adapters import SUPPORTED, UnsupportedFlowraError

VERSION = adapters.flowra_version() or "none"
REFUSED = adapters.flowra_version() is not None and adapters.line_of(VERSION) is None
pytestmark = pytest.mark.skipif(
    not REFUSED,
    reason=f"runs on a refused flowra release (0.0.9, 0.0.30, 0.0.45, 0.0.46 in ./dev sweep); installed: {VERSION}",
)


HOOK_MODULES = ("flowra.agent.flow.hooks", "flowra.agent.hooks")
"""Where each era keeps its hook classes (``HooksImpl``, ``HookEmitter``; 0.0.9: ``HookRegistry``)."""


def hook_functions() -> dict[tuple[str, str], Any]:
    """Every attribute of every class in flowra's hook module, by (class, name)."""
    for name in HOOK_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        classes = [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == name]
        assert classes, name
        return {(cls.__qualname__, attr): value for cls in classes for attr, value in vars(cls).items()}
    raise AssertionError(f"no hook module of flowra {VERSION} found ({', '.join(HOOK_MODULES)})")


FLOWRAS_OWN = hook_functions() if REFUSED else {}
"""flowra's hook classes as this module found them, before any test set tracing up."""


def flowras_hooks_untouched() -> bool:
    """flowra's hook classes (``emit`` and ``on`` of whatever this era calls them) hold exactly
    what they held before any test ran: nothing replaced, nothing wrapped, nothing added."""
    now = hook_functions()
    return now.keys() == FLOWRAS_OWN.keys() and all(now[k] is FLOWRAS_OWN[k] for k in now)


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
    assert "0.0.47 - 0.0.93" in SUPPORTED and "0.0.3 - 0.0.8" in SUPPORTED
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

    # nothing of the package touched flowra: no adapter imported, its hooks are its own
    assert not [name for name in sys.modules if name.startswith("flowra_otel.adapters.")]
    assert flowras_hooks_untouched()
    _, after = await run_app()
    assert after == before


async def test_past_the_gate_the_modern_adapter_takes_no_hold_of_this_release() -> None:
    """Reached past the gate (as a widened range once did), the modern adapter does not patch
    this release: its imports fail (no ``HooksImpl`` before 0.0.47), or its emit patch refuses a
    handler storage it does not know. Either way flowra's hooks stay its own and the app runs as before."""
    _, before = await run_app()
    try:
        try:
            emit_patch = importlib.import_module("flowra_otel.adapters.runtime_hooks.emit_patch")
        except ImportError:  # the adapter's own imports refuse this release
            refused = True
        else:
            with pytest.raises(TypeError, match="flowra_otel cannot trace this flowra: its HooksImpl lacks"):
                emit_patch.install()
            refused = not emit_patch.installed()
        assert refused
        assert flowras_hooks_untouched()
        _, after = await run_app()
        assert after == before == Greeting("hello Ada")
    finally:
        patch = sys.modules.get("flowra_otel.adapters.runtime_hooks.emit_patch")
        if patch is not None:
            patch.uninstall()
        for name in [n for n in sys.modules if n.startswith("flowra_otel.adapters.")]:
            del sys.modules[name]
