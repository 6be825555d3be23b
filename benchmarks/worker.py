"""One benchmark process on flowra 0.0.8, started by ``run.py``; prints one JSON object on stdout.

    python benchmarks/worker.py time --variants unpatched,patched,nosdk,nometrics,recording,raw,rawmetrics --runs 100
    python benchmarks/worker.py time --variants offbare,noop --runs 100
    python benchmarks/worker.py time --variants bare --runs 100
    python benchmarks/worker.py memory --variant recording --runs 300
    python benchmarks/worker.py profile --variant recording --runs 200

Variants:

* ``bare``       flowra alone, in a process that never imports ``flowra_otel`` (checked).
* ``noop``       ``OtelHooks(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())``,
                 in a process where no other ``OtelHooks`` exists: tracing switched off.
* ``offbare``    flowra alone, beside ``noop`` in that process.
* ``unpatched``  flowra alone, in a process that uses the plugin, with its patches taken off
                 (``flowra_otel.patches.uninstall()``) for the length of each of its blocks:
                 the same code as ``bare``, measured side by side with the others.
* ``patched``    an ``OtelHooks`` exists (so flowra's classes are patched for the whole process)
                 but none is on this runtime's registry.
* ``recording``  ``OtelHooks`` with a recording SDK ``TracerProvider`` (``BatchSpanProcessor`` into
                 a dropping exporter) and an SDK ``MeterProvider`` with an ``InMemoryMetricReader``.
* ``nosdk``      an enabled ``OtelHooks`` whose providers hand out no-op tracers and meters (not the
                 API's no-op provider classes, which the plugin recognises): the plugin's own work
                 with none of the SDK's.
* ``nometrics``  ``recording``'s tracer provider with a ``NoOpMeterProvider``: ``recording`` minus
                 this is what the metrics cost.
* ``raw``        no flowra: the 42 spans of one ``recording`` run (names, kinds, attributes,
                 parent) recreated with ``start_span`` / ``set_attributes`` / ``end`` on a set-up
                 like ``recording``'s; one "run" is one such trace.
* ``rawmetrics`` no flowra: the 86 histogram records of one ``recording`` run (instrument,
                 boundaries, attributes), repeated with ``Histogram.record`` on a ``MeterProvider``
                 with an ``InMemoryMetricReader``; one "run" is one run's records.

``time`` interleaves the variants in blocks of ``--block`` runs (rotating which goes first), so
slow drifts and bursts of machine noise hit them all alike. A variant with a
``BatchSpanProcessor`` flushes it at the end of each of its blocks, inside the timing: the export
work of its spans is charged to it, not to whichever block the processor's thread wakes up in.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import cProfile
import gc
import io
import json
import pstats
import sys
import time
import tracemalloc
import types
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import workload
from flowra.agent import HookRegistry

VARIANTS = ("bare", "offbare", "noop", "unpatched", "patched", "nosdk", "nometrics", "recording", "raw", "rawmetrics")
PATCHED_VARIANTS = frozenset({"patched", "nosdk", "nometrics", "recording"})
"""Variants of the plugin process that need the patches in (``unpatched`` blocks take them off)."""

type RunFn = Callable[[], Awaitable[object]]


class Setup:
    """A variant made ready: ``run()`` is one run; ``before_block`` sets the patch state it needs."""

    def __init__(self, name: str, run: RunFn, sdk: workload.RecordingSdk | None) -> None:
        self.name = name
        self.run = run
        self.sdk = sdk
        self.metric_records: int | None = None  # rawmetrics: histogram records per run

    def before_block(self) -> None:
        if self.name != "unpatched" and self.name not in PATCHED_VARIANTS:
            return
        from flowra_otel import patches

        if self.name == "unpatched":
            patches.uninstall()
        else:
            patches.install()

    def after_block(self) -> None:
        if self.sdk is not None:
            self.sdk.tracer_provider.force_flush()

    def spans_emitted(self) -> int | None:
        if self.sdk is None or self.name == "rawmetrics":
            return None
        return self.sdk.exported_spans()


def _noop_providers() -> tuple[Any, Any]:
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.trace import NoOpTracerProvider

    return NoOpTracerProvider(), NoOpMeterProvider()


async def make_setup(variant: str) -> Setup:
    if variant in {"raw", "rawmetrics"}:
        return await _raw_setup(variant)
    hooks = HookRegistry()
    sdk: workload.RecordingSdk | None = None
    if variant in {"patched", "unpatched"}:
        from flowra_otel import OtelHooks, patches

        if variant == "unpatched" and not (callable(getattr(patches, "uninstall", None))):
            raise RuntimeError("flowra_otel.patches.uninstall() is not available")
        # Any OtelHooks that can record patches flowra for the whole process; this one is unused.
        # (One with no-op tracer *and* meter providers patches nothing, so it would not do.)
        from opentelemetry.sdk.trace import TracerProvider

        OtelHooks(tracer_provider=TracerProvider(), meter_provider=_noop_providers()[1])
        if type(HookRegistry.__dict__["emit"]) is types.FunctionType:
            raise RuntimeError("creating an OtelHooks did not patch HookRegistry.emit")
    elif variant == "recording":
        from flowra_otel import OtelHooks

        sdk = workload.RecordingSdk.create()
        hooks.add(OtelHooks(tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider))
    elif variant == "nometrics":
        from flowra_otel import OtelHooks

        sdk = workload.RecordingSdk.create()
        hooks.add(OtelHooks(tracer_provider=sdk.tracer_provider, meter_provider=_noop_providers()[1]))
    elif variant == "nosdk":
        from flowra_otel import OtelHooks

        hooks.add(
            OtelHooks(
                tracer_provider=workload.OpaqueNoOpTracerProvider(), meter_provider=workload.OpaqueNoOpMeterProvider()
            )
        )
    elif variant == "noop":
        from flowra_otel import OtelHooks

        tracer_provider, meter_provider = _noop_providers()
        hooks.add(OtelHooks(tracer_provider=tracer_provider, meter_provider=meter_provider))
    elif variant not in {"bare", "offbare"}:
        raise ValueError(f"unknown variant {variant!r}")
    runtime = await workload.build_runtime(hooks)
    setup = Setup(variant, lambda: workload.run_once(runtime), sdk)
    setup.before_block()
    await workload.check_run(runtime)
    return setup


async def _raw_setup(variant: str) -> Setup:
    """Capture the spans and metric records of one real traced run, then replay them with the bare SDK."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from flowra_otel import OtelHooks

    capture = InMemorySpanExporter()
    capture_provider = TracerProvider()
    capture_provider.add_span_processor(SimpleSpanProcessor(capture))
    capture_reader = InMemoryMetricReader()
    capture_meters = MeterProvider(metric_readers=[capture_reader])
    hooks = HookRegistry()
    hooks.add(OtelHooks(tracer_provider=capture_provider, meter_provider=capture_meters))
    await workload.run_once(await workload.build_runtime(hooks))
    shapes = workload.capture_span_shapes(capture.get_finished_spans())
    records = workload.capture_metric_records(capture_reader.get_metrics_data())
    capture_provider.shutdown()
    capture_meters.shutdown()
    if len(shapes) != workload.SPANS_PER_RUN:
        raise RuntimeError(f"a traced run emitted {len(shapes)} spans, expected {workload.SPANS_PER_RUN}")

    sdk = workload.RecordingSdk.create()
    if variant == "rawmetrics":
        histograms = workload.make_histograms(sdk.meter_provider.get_meter("flowra_otel.benchmark.raw"), records)

        async def run_metrics() -> object:
            workload.record_raw_metrics(histograms, records)
            return len(records)

        setup = Setup(variant, run_metrics, sdk)
        setup.metric_records = len(records)
        return setup

    tracer = sdk.tracer_provider.get_tracer("flowra_otel.benchmark.raw")

    async def run() -> object:
        workload.emit_raw_spans(tracer, shapes)
        return None

    return Setup(variant, run, sdk)


class GcMeter:
    """Time spent in the cyclic garbage collector, charged to the variant whose block is running."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.ns: dict[str, int] = {}
        self.collections: dict[str, list[int]] = {}
        self._start = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if self.current is None:
            return
        if phase == "start":
            self._start = time.perf_counter_ns()
            return
        self.ns[self.current] = self.ns.get(self.current, 0) + time.perf_counter_ns() - self._start
        self.collections.setdefault(self.current, [0, 0, 0])[info["generation"]] += 1


async def time_runs(variants: list[str], runs: int, warmup: int, block: int) -> dict[str, Any]:
    if "bare" in variants and len(variants) > 1:
        raise ValueError("'bare' runs alone, in a process that never imports flowra_otel")
    setups = [await make_setup(v) for v in variants]
    meter = GcMeter()
    gc.callbacks.append(meter)
    for setup in setups:
        setup.before_block()
        for _ in range(warmup):
            await setup.run()
        setup.after_block()
    gc.collect()
    wall: dict[str, list[int]] = {s.name: [] for s in setups}
    cpu: dict[str, list[int]] = {s.name: [] for s in setups}
    wall_clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    for index in range(max(1, runs // block)):
        first = index % len(setups)
        for setup in setups[first:] + setups[:first]:
            setup.before_block()
            meter.current = setup.name
            block_wall: list[int] = []
            block_cpu: list[int] = []
            for _ in range(block):
                start_cpu, start = cpu_clock(), wall_clock()
                await setup.run()
                end = wall_clock()
                block_cpu.append(cpu_clock() - start_cpu)
                block_wall.append(end - start)
            if setup.sdk is not None:  # the spans still queued are this block's: their export is its cost
                start_cpu, start = cpu_clock(), wall_clock()
                setup.after_block()
                flush_wall, flush_cpu = wall_clock() - start, cpu_clock() - start_cpu
                block_wall = [t + flush_wall // block for t in block_wall]
                block_cpu = [t + flush_cpu // block for t in block_cpu]
            meter.current = None
            wall[setup.name].extend(block_wall)
            cpu[setup.name].extend(block_cpu)
    gc.callbacks.remove(meter)
    timed = max(1, runs // block) * block
    total_runs = 1 + warmup + timed  # check_run + warm-up + timed
    spans: dict[str, float | None] = {}
    for setup in setups:
        emitted = setup.spans_emitted()
        replay = setup.name in {"raw", "rawmetrics"}  # no check_run
        spans[setup.name] = None if emitted is None else emitted / (total_runs - replay)
        if setup.sdk is not None:
            setup.sdk.shutdown()
    imported = "flowra_otel" in sys.modules
    if variants == ["bare"] and imported:
        raise RuntimeError("the bare variant's process imported flowra_otel")
    patched = type(HookRegistry.__dict__["emit"]) is not types.FunctionType
    return {
        "wall_ns": wall,
        "cpu_ns": cpu,
        "spans_per_run": spans,
        "gc_ns_per_run": {s.name: meter.ns.get(s.name, 0) / timed for s in setups},
        "gc_collections_per_run": {
            s.name: [n / timed for n in meter.collections.get(s.name, [0, 0, 0])] for s in setups
        },
        "metric_records_per_run": {s.name: s.metric_records for s in setups if s.metric_records is not None},
        "flowra_otel_imported": imported,
        "flowra_patched_at_end": patched,
    }


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    var = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


async def memory_runs(variant: str, runs: int, warmup: int, checkpoints: int = 20) -> dict[str, Any]:
    """Traced-memory growth per run over ``runs`` runs that follow ``warmup`` runs.

    tracemalloc runs from before the set-up: had it started after the warm-up, every entry that a
    full, bounded cache (``functools.lru_cache``, jsonschema's ``referencing`` registry...) replaced
    later would show up as new traced memory, a curve that looks like growth and is not. At
    ``checkpoints`` points the span queue is flushed and a full collection run before reading the
    traced size; the growth per run is the least-squares slope through those points.
    """
    tracemalloc.start(1)
    setup = await make_setup(variant)
    for _ in range(warmup):
        await setup.run()

    def traced_now() -> int:
        setup.after_block()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    step = max(1, runs // checkpoints)
    marks = [*range(0, runs, step), runs]
    # Preallocated doubles: the measurement itself allocates nothing between checkpoints.
    xs = array.array("d", marks)
    ys = array.array("d", [0.0]) * len(marks)
    before = tracemalloc.take_snapshot()
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
        {"where": str(stat.traceback[0]), "bytes": stat.size_diff, "blocks": stat.count_diff}
        for stat in after.compare_to(before, "lineno")
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
        "checkpoints": [[int(x), int(y)] for x, y in zip(xs, ys, strict=True)],
        "peak_traced_bytes": peak,
        "seconds": elapsed,
        "top_growth": top,
    }


async def profile_runs(variant: str, runs: int, warmup: int, top: int) -> dict[str, Any]:
    """cProfile over ``runs`` runs: self time by package, the heaviest functions, flowra_otel's tree."""
    setup = await make_setup(variant)
    for _ in range(warmup):
        await setup.run()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        await setup.run()
    setup.after_block()
    profiler.disable()
    stats = pstats.Stats(profiler)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    by_package: dict[str, float] = {}
    rows: list[tuple[float, float, int, str]] = []
    for (filename, line, func), (_cc, calls, tottime, cumtime, _callers) in raw.items():
        package = _package_of(filename)
        by_package[package] = by_package.get(package, 0.0) + tottime
        rows.append((tottime, cumtime, calls, f"{_short(filename)}:{line}({func})"))
    rows.sort(reverse=True)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(r"flowra_otel", top)
    per_run = 1e3 / runs
    return {
        "variant": variant,
        "runs": runs,
        "profiled_ms_per_run": sum(by_package.values()) * per_run,
        "by_package_ms_per_run": {k: v * per_run for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])},
        "top_self": [
            {"self_ms": t * per_run, "cum_ms": c * per_run, "calls": n / runs, "where": w} for t, c, n, w in rows[:top]
        ],
        "plugin_self": [
            {"self_ms": t * per_run, "cum_ms": c * per_run, "calls": n / runs, "where": w}
            for t, c, n, w in rows
            if "flowra_otel/" in w or "opentelemetry/" in w or "wrapt/" in w
        ][:top],
        "flowra_otel_by_cum": [
            {"self_ms": t * per_run, "cum_ms": c * per_run, "calls": n / runs, "where": w}
            for t, c, n, w in sorted(rows, key=lambda r: -r[1])
            if "flowra_otel/" in w
        ][:top],
        "flowra_otel_cumulative": text.getvalue(),
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
        ("/benchmarks/", "benchmark workload"),
    ):
        if marker in path:
            return name
    if path.startswith(("~", "<")):
        return "builtins"
    return "other"


def _short(filename: str) -> str:
    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/work/main/", "/lib/python3.13/", "/lib/python3.12/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("time", "memory", "profile"))
    parser.add_argument("--variants", default="bare", help="comma-separated, for time")
    parser.add_argument("--variant", choices=VARIANTS, default="recording", help="for memory and profile")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--block", type=int, default=5)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    result: dict[str, Any]
    if args.mode == "time":
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            parser.error(f"unknown variants {unknown}")
        result = asyncio.run(time_runs(variants, args.runs, args.warmup, args.block))
    elif args.mode == "memory":
        result = asyncio.run(memory_runs(args.variant, args.runs, args.warmup))
    else:
        result = asyncio.run(profile_runs(args.variant, args.runs, args.warmup, args.top))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
