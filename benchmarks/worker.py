"""One benchmark process on flowra 0.0.8, started by ``run.py``; prints one JSON object on stdout.

    python benchmarks/worker.py capture --out PLAN.pickle [--iterations 20]
    python benchmarks/worker.py serve --variants bare,floor,floor_spans --plan PLAN.pickle --block 5
    python benchmarks/worker.py serve --variants untraced,plugin,spans_only --block 5
    python benchmarks/worker.py serve --variants offbare,off --block 5
    python benchmarks/worker.py memory --variant plugin --runs 10000
    python benchmarks/worker.py profile --variant plugin --runs 200

It uses the plugin only through its public API (``OtelHooks``, added to a ``HookRegistry``, and
the providers it is given), so it keeps measuring the same thing whatever the plugin's internals.

Variants (three kinds of process, because creating an ``OtelHooks`` that can record changes flowra
for the whole process):

* ``bare``         flowra alone, in a process that never imports ``flowra_otel`` (checked).
* ``floor``        bare flowra + :class:`floor.Floor`: plain hook handlers that make the plugin's
                   spans and metric records (captured from one plugin run) with the raw SDK, on the
                   plugin's SDK set-up. Same process as ``bare``.
* ``floor_spans``  the same without the metric records (the floor of ``spans_only``).
* ``plugin``       ``OtelHooks`` with a recording SDK ``TracerProvider`` (``BatchSpanProcessor``
                   into a dropping exporter) and an SDK ``MeterProvider`` with an
                   ``InMemoryMetricReader``.
* ``spans_only``   the same tracer provider, no metrics: ``OtelHooks(metrics=False)`` when the
                   constructor has that option, else a ``NoOpMeterProvider``.
* ``untraced``     no ``OtelHooks`` on this runtime's registry, while another registry of the
                   process has a recording one (the plugin is installed, this run is not traced).
                   Same process as ``plugin``.
* ``off``          ``OtelHooks(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())``
                   in a process with no other ``OtelHooks``: tracing switched off.
* ``offbare``      bare flowra beside ``off`` (if creating ``off`` changed any flowra class, the
                   result says so and ``off`` is compared with ``bare`` instead).

``serve`` runs blocks of ``--block`` runs of the variant ``run.py`` names on stdin, one at a time,
so that variants of different processes are interleaved block by block (see :func:`serve`). A
variant with a ``BatchSpanProcessor`` flushes it at the end of each block, inside the timing, so
the export work of its spans is charged to it. ``--concurrency N`` makes one "run" N concurrent
runs of the runtime (``asyncio.gather``).
"""

from __future__ import annotations

import argparse
import array
import asyncio
import cProfile
import gc
import inspect
import json
import pickle
import pstats
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import floor
import workload
from flowra.agent import HookRegistry

FLOOR_VARIANTS = ("bare", "floor", "floor_spans")
PLUGIN_VARIANTS = ("untraced", "plugin", "spans_only")
OFF_VARIANTS = ("offbare", "off")
VARIANTS = FLOOR_VARIANTS + PLUGIN_VARIANTS + OFF_VARIANTS

type RunFn = Callable[[], Awaitable[object]]


class Setup:
    """A variant made ready: ``run()`` is one run (or ``concurrency`` concurrent ones)."""

    def __init__(
        self, name: str, run: RunFn, sdk: workload.RecordingSdk | None, keep: object = None, info: str = ""
    ) -> None:
        self.name = name
        self.info = info  # how the variant was made, where that varies (spans_only)
        self.run = run
        self.sdk = sdk
        self.keep = keep  # objects that must stay alive for the variant (an unused OtelHooks)

    def flush(self) -> None:
        if self.sdk is not None:
            self.sdk.tracer_provider.force_flush()


def make_hooks(tracer_provider: Any, meter_provider: Any) -> Any:
    """``OtelHooks(tracer_provider=..., meter_provider=...)``: the plugin as an app creates it."""
    from flowra_otel import OtelHooks

    return OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider)


def make_spans_only_hooks(tracer_provider: Any) -> tuple[Any, str]:
    """The plugin with spans and no metrics: ``metrics=False`` where the constructor has it."""
    from opentelemetry.metrics import NoOpMeterProvider

    from flowra_otel import OtelHooks

    if "metrics" in inspect.signature(OtelHooks).parameters:
        options: dict[str, Any] = {"metrics": False}  # the option, where this version has it
        return OtelHooks(tracer_provider=tracer_provider, **options), "metrics=False"
    return OtelHooks(tracer_provider=tracer_provider, meter_provider=NoOpMeterProvider()), "NoOpMeterProvider()"


def flowra_fingerprint() -> dict[str, int]:
    """The identity of every attribute of every class defined in flowra's modules: creating an
    ``OtelHooks`` that patches flowra changes some of them (public check, no plugin internals)."""
    prints: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "flowra" or name.startswith("flowra.")):
            continue
        for cls in list(vars(module).values()):
            if isinstance(cls, type) and cls.__module__ == name:
                for attr, value in list(vars(cls).items()):
                    prints[f"{name}.{cls.__qualname__}.{attr}"] = id(value)
    return prints


def _runner(runtime: Any, concurrency: int, begin: Callable[[], None] | None) -> RunFn:
    async def one(storage_key: str | None = None) -> object:
        if begin is not None:
            begin()
        return await workload.run_once(runtime, storage_key)

    if concurrency == 1:
        return one

    async def many() -> object:
        # Concurrent runs on one runtime need distinct storage keys (flowra refuses a second "root").
        return await asyncio.gather(*(one(f"run-{i}") for i in range(concurrency)))

    return many


async def make_setup(variant: str, iterations: int, concurrency: int, plan: floor.Plan | None) -> Setup:
    hooks = HookRegistry()
    sdk: workload.RecordingSdk | None = None
    begin: Callable[[], None] | None = None
    keep: object = None
    info = ""
    if variant in {"floor", "floor_spans"}:
        if plan is None:
            raise ValueError(f"{variant} needs --plan (made by the capture mode)")
        if plan.iterations != iterations:
            raise ValueError(f"the plan is of {plan.iterations} iterations, not {iterations}")
        sdk = workload.RecordingSdk.create()
        meters = sdk.meter_provider if variant == "floor" else None
        hooks.add(floor.Floor(plan, sdk.tracer_provider, meters))
        begin = floor.Floor.begin_run
    elif variant == "plugin":
        sdk = workload.RecordingSdk.create()
        hooks.add(make_hooks(sdk.tracer_provider, sdk.meter_provider))
    elif variant == "spans_only":
        sdk = workload.RecordingSdk.create()
        spans_only, info = make_spans_only_hooks(sdk.tracer_provider)
        hooks.add(spans_only)
    elif variant == "untraced":
        # The plugin is installed and recording elsewhere in the process; this registry has none.
        other_sdk = workload.RecordingSdk.create()
        other = HookRegistry()
        other.add(make_hooks(other_sdk.tracer_provider, other_sdk.meter_provider))
        keep = (other, other_sdk)
    elif variant == "off":
        from opentelemetry.metrics import NoOpMeterProvider
        from opentelemetry.trace import NoOpTracerProvider

        hooks.add(make_hooks(NoOpTracerProvider(), NoOpMeterProvider()))
    elif variant not in {"bare", "offbare"}:
        raise ValueError(f"unknown variant {variant!r}")
    runtime = await workload.build_runtime(hooks, iterations)
    if begin is not None:
        begin()
    await workload.check_run(runtime, iterations)
    return Setup(variant, _runner(runtime, concurrency, begin), sdk, keep, info)


def load_plan(path: str | None) -> floor.Plan | None:
    if not path:
        return None
    plan: floor.Plan = pickle.loads(Path(path).read_bytes())
    return plan


async def serve(
    variants: list[str], warmup: int, block: int, iterations: int, concurrency: int, plan_path: str | None
) -> dict[str, Any]:
    """Set the variants up, then run one block of ``block`` runs per command read from stdin.

    ``run.py`` keeps one such process of each kind alive and sends the blocks to them in turn, so
    the variants of different processes are interleaved block by block, and a burst of load on
    the (shared) machine hits them alike. Protocol: a ``{"ready": ...}`` line once set up; then per
    ``run VARIANT`` line one ``{"cpu_ns": [...], "wall_ns": [...]}`` line (the block's runs, CPU
    time of the whole process, with the block's span flush spread over its runs); ``end`` ends it.
    """
    kinds = {frozenset(FLOOR_VARIANTS), frozenset(PLUGIN_VARIANTS), frozenset(OFF_VARIANTS)}
    if not any(set(variants) <= kind for kind in kinds):
        raise ValueError(f"{variants}: variants of one process kind only (see the module's docstring)")
    plan = load_plan(plan_path)
    if plan is not None and any(v.startswith("floor") for v in variants):
        await floor.verify(plan)  # the floor makes the very telemetry the plugin made
    before = flowra_fingerprint()
    setups = {v: await make_setup(v, iterations, concurrency, plan) for v in variants}
    changed = sorted(k for k, v in flowra_fingerprint().items() if before.get(k, v) != v)
    for setup in setups.values():
        for _ in range(warmup):
            await setup.run()
        setup.flush()
    gc.collect()
    _reply({"ready": variants})
    wall_clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    timed = 0
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "end":
            break
        setup = setups[command[1]]
        block_cpu: list[int] = []
        block_wall: list[int] = []
        for _ in range(block):
            start_cpu, start = cpu_clock(), wall_clock()
            await setup.run()
            end = wall_clock()
            block_cpu.append(cpu_clock() - start_cpu)
            block_wall.append(end - start)
        if setup.sdk is not None:  # the spans still queued are this block's: their export is its cost
            start_cpu, start = cpu_clock(), wall_clock()
            setup.flush()
            flush_cpu, flush_wall = cpu_clock() - start_cpu, wall_clock() - start
            block_cpu = [t + flush_cpu // block for t in block_cpu]
            block_wall = [t + flush_wall // block for t in block_wall]
        timed += block
        _reply({"cpu_ns": block_cpu, "wall_ns": block_wall})
    blocks_per_variant = timed // max(1, len(setups))
    total = 1 + (warmup + blocks_per_variant) * concurrency  # check_run, then warm-up and timed "runs"
    spans: dict[str, float | None] = {}
    for setup in setups.values():
        spans[setup.name] = None
        if setup.sdk is not None:
            spans[setup.name] = setup.sdk.exported_spans() / total
            setup.sdk.shutdown()
    if set(variants) <= set(FLOOR_VARIANTS) and "flowra_otel" in sys.modules:
        raise RuntimeError("the floor process imported flowra_otel")
    return {
        "spans_per_run": spans,
        "info": {s.name: s.info for s in setups.values() if s.info},
        "flowra_changed": changed[:20],
        "flowra_changed_count": len(changed),
    }


async def plain_runs(variant: str, runs: int, warmup: int, iterations: int, plan_path: str | None) -> dict[str, Any]:
    """Set ``variant`` up, warm it up, then make ``runs`` runs and flush: nothing timed. Run under
    an instruction counter twice (two run counts), the difference is the instructions per run."""
    setup = await make_setup(variant, iterations, 1, load_plan(plan_path))
    for _ in range(warmup):
        await setup.run()
    setup.flush()
    gc.collect()
    for _ in range(runs):
        await setup.run()
    setup.flush()
    return {"variant": variant, "runs": runs}


def _reply(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    var = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


async def memory_runs(
    variant: str, runs: int, warmup: int, iterations: int, plan_path: str | None, checkpoints: int = 20
) -> dict[str, Any]:
    """Traced-memory growth per run over ``runs`` runs that follow ``warmup`` runs.

    tracemalloc runs from before the set-up: had it started after the warm-up, every entry that a
    full, bounded cache (``functools.lru_cache``, jsonschema's ``referencing`` registry...) replaced
    later would show up as new traced memory, a curve that looks like growth and is not. At
    ``checkpoints`` points the span queue is flushed and a full collection run before reading the
    traced size; the growth per run is the least-squares slope through those points.
    """
    tracemalloc.start(1)
    setup = await make_setup(variant, iterations, 1, load_plan(plan_path))
    for _ in range(warmup):
        await setup.run()

    def traced_now() -> int:
        setup.flush()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    step = max(1, runs // checkpoints)
    marks = [*range(0, runs, step), runs]
    xs = array.array("d", marks)  # preallocated: the measurement allocates nothing between checkpoints
    ys = array.array("d", [0.0]) * len(marks)
    snapshot = tracemalloc.take_snapshot()
    ys[0] = traced_now()
    start = time.perf_counter()
    for index in range(1, len(marks)):
        for _ in range(marks[index] - marks[index - 1]):
            await setup.run()
        ys[index] = traced_now()
    elapsed = time.perf_counter() - start
    after = tracemalloc.take_snapshot()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    top = [
        {"where": _short(str(stat.traceback[0])), "bytes": stat.size_diff}
        for stat in after.compare_to(snapshot, "lineno")
        if stat.size_diff > 0 and not stat.traceback[0].filename.endswith("tracemalloc.py")
    ][:5]
    if setup.sdk is not None:
        setup.sdk.shutdown()
    return {
        "variant": variant,
        "runs": runs,
        "warmup": warmup,
        "slope_bytes_per_run": _slope(xs, ys),
        "growth_bytes": ys[-1] - ys[0],
        "peak_traced_bytes": peak,
        "seconds": elapsed,
        "top_growth": top,
    }


async def profile_runs(variant: str, runs: int, warmup: int, top: int, plan_path: str | None) -> dict[str, Any]:
    """cProfile over ``runs`` runs, per run: self time by package; the plugin's functions by
    self time (tottime) and by cumulative time (cumtime); the heaviest functions overall."""
    setup = await make_setup(variant, workload.ITERATIONS, 1, load_plan(plan_path))
    for _ in range(warmup):
        await setup.run()
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
        ("/wrapt/", "wrapt"),
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


async def capture_plan(iterations: int, out: str) -> dict[str, Any]:
    plan = await floor.capture(make_hooks, iterations)
    Path(out).write_bytes(pickle.dumps(plan))  # noqa: ASYNC240 (before any timing)
    return {
        "iterations": iterations,
        "spans": len(plan.spans),
        "metric_records": len(plan.records),
        "events_with_work": len(plan.events),
        "plan": plan.describe().splitlines()[:8],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("capture", "serve", "memory", "profile", "runs"))
    parser.add_argument("--variants", default="bare", help="comma-separated, for time")
    parser.add_argument("--variant", choices=VARIANTS, default="plugin", help="for memory and profile")
    parser.add_argument("--plan", help="the floor's plan, made by capture")
    parser.add_argument("--out", help="where capture writes the plan")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--block", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=workload.ITERATIONS)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    result: dict[str, Any]
    if args.mode == "capture":
        if not args.out:
            parser.error("capture needs --out")
        result = asyncio.run(capture_plan(args.iterations, args.out))
    elif args.mode == "serve":
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            parser.error(f"unknown variants {unknown}")
        result = asyncio.run(serve(variants, args.warmup, args.block, args.iterations, args.concurrency, args.plan))
    elif args.mode == "runs":
        result = asyncio.run(plain_runs(args.variant, args.runs, args.warmup, args.iterations, args.plan))
    elif args.mode == "memory":
        result = asyncio.run(memory_runs(args.variant, args.runs, args.warmup, args.iterations, args.plan))
    else:
        result = asyncio.run(profile_runs(args.variant, args.runs, args.warmup, args.top, args.plan))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
