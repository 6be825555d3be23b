"""One benchmark process on flowra 0.0.86 - 0.0.93, started by ``run_093.py``; prints one JSON object.

    .venv/bin/python benchmarks/modern_worker.py capture --out PLAN.pickle
    .venv/bin/python benchmarks/modern_worker.py runs --variant plugin --runs 24 --warmup 5 [--plan PLAN.pickle]
    .venv/bin/python benchmarks/modern_worker.py profile --variant plugin --runs 100 [--plan PLAN.pickle]

``runs`` sets one variant up, checks it (the workload's 20 tool results; the spans its exporter
received per run), warms it up, then makes ``--runs`` runs, untimed: run twice under an
instruction counter (two run counts), the difference is its instructions per run
(``run_093.py``). It uses the plugin only through its public API (``OtelHooks(...).install``).

Variants (each in a process of its own; none but the plugin's import ``flowra_otel``, checked:
the plugin patches ``HooksImpl.emit`` for the whole process):

* ``bare``              flowra alone.
* ``floor``             bare + :class:`modern_floor.Floor`: plain ``runtime.hooks`` handlers that
                        make the plugin's spans and metric records (captured from one plugin run)
                        with the raw SDK, on the plugin's SDK set-up.
* ``floor_spans``       the same without the metric records (the floor of ``spans_only``).
* ``flowing_context``   what making a context current in every node's steps costs by itself on
                        this flowra (no span, no record): a ``FlowingVar`` whose ``on_enter`` /
                        ``on_exit`` attach and detach an OpenTelemetry context (the API's), given a
                        value of its own by every agent node (an ``AgentSpan`` handler), as the
                        plugin gives the run's agent and each tool call a frame. flowra calls them
                        around each step's creation and result, in the engine's task.
* ``ext_otel``          flowra's own tracer, ``flowra.ext.otel.OTEL_TRACING.install(runtime)``, its
                        defaults (content capture off; agent, step, LLM and tool spans); it takes
                        the *global* tracer provider (set to the recording one) and records no metrics.
* ``ext_otel_nosteps``  the same with ``trace_steps=False``.
* ``plugin``            ``OtelHooks(tracer_provider=..., meter_provider=..., capture_content=False).install(runtime)``.
* ``spans_only``        the same with ``metrics=False``.
* ``untraced``          the plugin installed in the process (its emit patch, and a recording
                        ``OtelHooks`` on another runtime, which has run), this runtime without one.

The SDK set-up of every traced variant: ``TracerProvider`` + ``BatchSpanProcessor`` into an
exporter that drops spans, ``MeterProvider`` with an ``InMemoryMetricReader``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import pickle
import pstats
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import modern_floor
import modern_workload
from flowra.agent import AgentRuntime

VARIANTS = (
    "bare",
    "floor",
    "floor_spans",
    "flowing_context",
    "ext_otel",
    "ext_otel_nosteps",
    "plugin",
    "spans_only",
    "content_off",
    "untraced",
)
PLUGIN_VARIANTS = frozenset({"plugin", "spans_only", "content_off", "untraced"})
CONTENT = {"tool_loop": False, "support": True}
"""Content capture of ``plugin``, ``spans_only`` and ``ext_otel`` per workload (``content_off``:
always off): the tool loop's history is measured without it, the support agent with it."""


class Setup:
    """A variant made ready: ``run()`` is one run."""

    def __init__(
        self, run: Callable[[], Awaitable[object]], sdk: modern_workload.RecordingSdk | None, keep: object
    ) -> None:
        self.run = run
        self.sdk = sdk
        self.keep = keep  # what must stay alive (the other runtime of ``untraced``)

    def flush(self) -> None:
        if self.sdk is not None:
            self.sdk.flush()


def install_plugin(
    runtime: AgentRuntime, tracer_provider: Any, meter_provider: Any, *, content: bool = False, **options: Any
) -> None:
    """``OtelHooks(...).install(runtime)``: the plugin as an app sets it up."""
    from flowra_otel import OtelHooks

    OtelHooks(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=content, **options
    ).install(runtime)


def load_plan(path: str | None) -> modern_floor.Plan | None:
    if not path:
        return None
    plan: modern_floor.Plan = pickle.loads(Path(path).read_bytes())
    return plan


async def make_setup(
    variant: str, iterations: int, plan: modern_floor.Plan | None, workload_name: str = "tool_loop"
) -> tuple[Setup, float | None]:
    """The variant, checked once; also the spans its exporter received from that run."""
    workload = modern_floor.WORKLOADS[workload_name]
    content = CONTENT[workload_name]
    runtime = workload.build_runtime(iterations)
    sdk: modern_workload.RecordingSdk | None = None
    begin: Callable[[], None] | None = None
    keep: object = None
    if variant in {"floor", "floor_spans"}:
        if plan is None:
            raise ValueError(f"{variant} needs --plan (made by the capture mode)")
        if (plan.iterations, plan.workload) != (iterations, workload_name):
            raise ValueError(f"the plan is of {plan.workload} x {plan.iterations}, not {workload_name} x {iterations}")
        await modern_floor.verify(plan)  # the floor makes the very telemetry the plugin made
        sdk = modern_workload.RecordingSdk.create()
        modern_floor.Floor(plan, sdk.tracer_provider, sdk.meter_provider if variant == "floor" else None).install(
            runtime
        )
        begin = modern_floor.Floor.begin_run
    elif variant == "flowing_context":
        keep = flowing_context(runtime)
    elif variant in {"ext_otel", "ext_otel_nosteps"}:
        from flowra.ext.otel import OTEL_TRACING
        from opentelemetry import trace

        sdk = modern_workload.RecordingSdk.create()
        trace.set_tracer_provider(sdk.tracer_provider)  # it takes the global provider
        OTEL_TRACING.install(runtime, trace_steps=variant == "ext_otel", capture_content=content)
    elif variant == "plugin":
        sdk = modern_workload.RecordingSdk.create()
        install_plugin(runtime, sdk.tracer_provider, sdk.meter_provider, content=content)
    elif variant == "spans_only":
        sdk = modern_workload.RecordingSdk.create()
        install_plugin(runtime, sdk.tracer_provider, sdk.meter_provider, content=content, metrics=False)
    elif variant == "content_off":
        sdk = modern_workload.RecordingSdk.create()
        install_plugin(runtime, sdk.tracer_provider, sdk.meter_provider)
    elif variant == "untraced":
        other_sdk = modern_workload.RecordingSdk.create()
        other = workload.build_runtime(iterations)
        install_plugin(other, other_sdk.tracer_provider, other_sdk.meter_provider, content=content)
        await workload.check_run(other, iterations)
        if other_sdk.exported_spans() != workload.spans_per_run(iterations):
            raise RuntimeError("the other runtime of untraced is not traced")
        keep = (other, other_sdk)
    elif variant != "bare":
        raise ValueError(f"unknown variant {variant!r}")

    async def run() -> object:
        if begin is not None:
            begin()
        return await workload.run_once(runtime)

    if begin is not None:
        begin()
    before = sdk.exported_spans() if sdk is not None else 0
    await workload.check_run(runtime, iterations)
    spans = float(sdk.exported_spans() - before) if sdk is not None else None
    return Setup(run, sdk, keep), spans


def flowing_context(runtime: AgentRuntime) -> object:
    """The ``flowing_context`` variant's subscription: a flowing OpenTelemetry context per agent node."""
    from flowra.agent import AgentSpan, FlowingVar
    from opentelemetry import context as otel_context
    from opentelemetry.context import Context

    def enter(context: Context | None) -> object:
        return None if context is None else otel_context.attach(context)

    var: FlowingVar[Context | None] = runtime.flowing.create_var(
        default=None, on_enter=enter, on_exit=otel_context.detach
    )

    def on_agent(event: Any) -> None:
        var.set(Context(otel_context.get_current()))  # a value of its own: flowra switches it per step

    runtime.hooks.on_span(AgentSpan, on_agent)
    return var


def _check_process(variant: str) -> None:
    if variant not in PLUGIN_VARIANTS and "flowra_otel" in sys.modules:
        raise RuntimeError(f"the {variant} process imported flowra_otel")


async def plain_runs(
    variant: str, runs: int, warmup: int, iterations: int, plan_path: str | None, workload_name: str
) -> dict[str, Any]:
    """Set ``variant`` up, warm it up, then make ``runs`` runs and flush: nothing timed."""
    setup, spans = await make_setup(variant, iterations, load_plan(plan_path), workload_name)
    for _ in range(warmup):
        await setup.run()
    setup.flush()
    gc.collect()
    for _ in range(runs):
        await setup.run()
    setup.flush()
    _check_process(variant)
    plugin = sys.modules.get("flowra_otel")
    where = getattr(plugin, "__file__", None) if plugin is not None else None
    return {"variant": variant, "runs": runs, "spans_per_run": spans, "flowra_otel": where}


async def profile_runs(
    variant: str, runs: int, warmup: int, top: int, plan_path: str | None, workload_name: str, iterations: int
) -> dict[str, Any]:
    """cProfile over ``runs`` runs, per run: self time by package, and the heaviest functions of
    ``flowra_otel`` and of any package, by self time (tottime) and cumulative time (cumtime)."""
    setup, _ = await make_setup(variant, iterations, load_plan(plan_path), workload_name)
    for _ in range(warmup):
        await setup.run()
    setup.flush()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        await setup.run()
    setup.flush()
    profiler.disable()
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    per_run = 1e3 / runs
    by_package: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    for (filename, line, func), (_cc, calls, tottime, cumtime, _callers) in raw.items():
        package = _package_of(filename)
        by_package[package] = by_package.get(package, 0.0) + tottime * per_run
        rows.append(
            {
                "self_ms": tottime * per_run,
                "cum_ms": cumtime * per_run,
                "calls": calls / runs,
                "where": f"{_short(filename)}:{line}({func})",
                "package": package,
            }
        )
    plugin_rows = [r for r in rows if r["package"] == "flowra_otel"]
    return {
        "variant": variant,
        "runs": runs,
        "profiled_ms_per_run": sum(by_package.values()),
        "by_package_ms_per_run": dict(sorted(by_package.items(), key=lambda kv: -kv[1])),
        "plugin_calls_per_run": sum(r["calls"] for r in plugin_rows),
        "plugin_by_self": sorted(plugin_rows, key=lambda r: -r["self_ms"])[:top],
        "plugin_by_cum": sorted(plugin_rows, key=lambda r: -r["cum_ms"])[:top],
        "all_by_self": sorted(rows, key=lambda r: -r["self_ms"])[:top],
    }


def _package_of(filename: str) -> str:
    path = filename.replace("\\", "/")
    for marker, name in (
        ("/flowra_otel/", "flowra_otel"),
        ("/opentelemetry/sdk/", "opentelemetry.sdk"),
        ("/opentelemetry/", "opentelemetry.api"),
        ("/flowra/", "flowra"),
        ("/asyncio/", "asyncio"),
        ("/benchmarks/", "benchmark (workload, floor)"),
    ):
        if marker in path:
            return name
    if path.startswith(("~", "<")):
        return "builtins"
    return "other"


def _short(filename: str) -> str:
    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/benchmarks/", "/lib/python3.13/", "/lib/python3.12/"):
        if marker in path:
            return path.split(marker, 1)[1]
    if "/flowra_otel/" in path:
        return "flowra_otel/" + path.split("/flowra_otel/", 1)[1]
    return path


async def capture_plan(iterations: int, out: str, workload_name: str) -> dict[str, Any]:
    content = CONTENT[workload_name]

    def install(runtime: AgentRuntime, tracer_provider: Any, meter_provider: Any) -> None:
        install_plugin(runtime, tracer_provider, meter_provider, content=content)

    plan = await modern_floor.capture(install, iterations, workload_name)
    Path(out).write_bytes(pickle.dumps(plan))  # noqa: ASYNC240 (before anything is measured)
    return {"iterations": iterations, **plan.summary()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("capture", "runs", "profile"))
    parser.add_argument("--variant", choices=VARIANTS, default="plugin")
    parser.add_argument("--plan", help="the floor's plan, made by capture")
    parser.add_argument("--out", help="where capture writes the plan")
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--workload", choices=tuple(modern_floor.WORKLOADS), default="tool_loop")
    parser.add_argument("--iterations", type=int, help="rounds of the workload (default: its ITERATIONS)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    result: dict[str, Any]
    iterations = args.iterations or modern_floor.WORKLOADS[args.workload].ITERATIONS
    if args.mode == "capture":
        if not args.out:
            parser.error("capture needs --out")
        result = asyncio.run(capture_plan(iterations, args.out, args.workload))
    elif args.mode == "runs":
        result = asyncio.run(plain_runs(args.variant, args.runs, args.warmup, iterations, args.plan, args.workload))
    else:
        result = asyncio.run(
            profile_runs(args.variant, args.runs, args.warmup, args.top, args.plan, args.workload, iterations)
        )
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
