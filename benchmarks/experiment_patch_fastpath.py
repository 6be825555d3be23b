"""Experiment, not part of ``./dev bench``: what two more changes to ``patches.py`` would save.

    .venv/bin/python benchmarks/experiment_patch_fastpath.py [BLOCKS]

The case: an untraced run (no ``OtelHooks`` on its runtime's registry) in a process where some
other registry has an enabled ``OtelHooks`` (variant a' of the benchmark). The plugin then makes
a ``SpanBook`` for the run and every emit and step goes through it, although nothing can be traced.
This script monkeypatches the plugin's internals in this process only (so it breaks if they are
renamed) and times, interleaved in blocks of 5 runs, the benchmark workload as:

* ``unpatched``  flowra alone (the plugin's patches taken off);
* ``patched``    the plugin as it is (a');
* ``no_book``    fix 1: ``_traced_run`` makes no ``SpanBook`` when the runtime's own ``HookRegistry``
                 has no live ``OtelHooks`` handler (the process-wide registration count stays as the
                 first check), so emits and steps take the wrappers' ``book is None`` path;
* ``plain``      fix 1 + fix 2: the wrapt ``FunctionWrapper`` patches of ``emit``,
                 ``_Engine__execute_node`` and the provider's ``call`` replaced by plain functions
                 whose fast path (no book) calls the original directly.

Measured on the benchmark machine (2 cores, CPython 3.13, flowra 0.0.8, flowra-otel at f925f40),
60 blocks, over unpatched: patched +6.3%, no_book +3.0%, plain +1.2%.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import workload
import wrapt
from flowra.agent import HookRegistry
from flowra.runtime import AgentRuntime
from flowra.runtime.engine import Engine
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracer

from flowra_otel import OtelHooks, patches

_original_traced_run = patches._traced_run


def _live(hooks: OtelHooks) -> bool:
    noop_meter = type(hooks.instruments.token_usage).__name__.startswith("NoOp")
    return not (isinstance(hooks.tracer, NoOpTracer) and noop_meter)


def _has_live_otel(runtime: Any) -> bool:
    registry = runtime._AgentRuntime__services.get(HookRegistry)
    handlers: dict[type, list[Any]] = getattr(registry, "_HookRegistry__handlers", {})
    return any(
        isinstance(owner := getattr(h, "__self__", None), OtelHooks) and _live(owner)
        for hs in handlers.values()
        for h in hs
    )


async def _traced_run_no_book(wrapped: Any, instance: Any, args: Any, kwargs: Any, *, resume: bool) -> Any:
    if patches.current_book() is None and not _has_live_otel(instance):
        return await wrapped(*args, **kwargs)
    return await _original_traced_run(wrapped, instance, args, kwargs, resume=resume)


def _plain(original: Callable[..., Any], plugin: Any) -> Callable[..., Any]:
    current_book = patches.current_book

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if current_book() is None:
            return original(self, *args, **kwargs)  # the original coroutine, no extra layer
        return plugin.__get__(self, type(self))(*args, **kwargs)

    return method


_TARGETS = (
    (Engine, "_Engine__execute_node"),
    (HookRegistry, "emit"),
    (workload.ScriptedToolLoopProvider, "call"),
    (AgentRuntime, "run"),
    (AgentRuntime, "resume"),
)
_STATE: dict[tuple[type, str], tuple[Any, Any, Any]] = {}


def _capture() -> None:
    for cls, name in _TARGETS:
        plugin = cls.__dict__[name]
        if not isinstance(plugin, wrapt.FunctionWrapper):
            raise RuntimeError(f"{cls.__name__}.{name} is not patched with wrapt any more")
        original = plugin.__wrapped__
        plain = plugin if cls is AgentRuntime else _plain(original, plugin)
        _STATE[(cls, name)] = (original, plugin, plain)


def _set_mode(mode: str) -> None:
    for (cls, name), (original, plugin, plain) in _STATE.items():
        chosen = original if mode == "unpatched" else plain if mode == "plain" else plugin
        setattr(cls, name, chosen)
    fixed = mode in {"no_book", "plain"}
    patches._traced_run = _traced_run_no_book if fixed else _original_traced_run


async def main(blocks: int) -> None:
    elsewhere = HookRegistry()  # another registry of the process, with an enabled OtelHooks
    elsewhere.add(OtelHooks(tracer_provider=TracerProvider(), meter_provider=NoOpMeterProvider()))
    _capture()
    bare = await workload.build_runtime(HookRegistry())
    modes: list[tuple[str, AgentRuntime]] = [
        ("unpatched", bare),
        ("patched", bare),
        ("no_book", bare),
        ("plain", bare),
    ]
    times: dict[str, list[int]] = {m: [] for m, _ in modes}
    for mode, runtime in modes:
        _set_mode(mode)
        await workload.check_run(runtime)
        for _ in range(5):
            await workload.run_once(runtime)
    for index in range(blocks):
        first = index % len(modes)
        for mode, runtime in modes[first:] + modes[:first]:
            _set_mode(mode)
            for _ in range(5):
                start = time.process_time_ns()
                await workload.run_once(runtime)
                times[mode].append(time.process_time_ns() - start)
    _set_mode("patched")
    base = statistics.median(times["unpatched"])
    for mode, samples in times.items():
        median = statistics.median(samples)
        print(f"{mode:<11} {median / 1e6:7.3f} ms  {(median / base - 1) * 100:+5.1f}%")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
