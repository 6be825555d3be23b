"""One benchmark process, started by ``bench.py``; prints one JSON object (its last line).

    python benchmarks/worker.py capture --workload support --out PLAN.pickle
    python benchmarks/worker.py runs --workload support --variant plugin --runs 23 --warmup 5 [--plan PLAN.pickle]
    python benchmarks/worker.py profile --workload support --variant plugin --runs 100 [--plan PLAN.pickle]
    python benchmarks/worker.py memory --workload support --variant plugin --runs 10000

Either flowra line: the workload names it (``workloads.py``), and its module (``modern_line.py``
or ``old_line.py``) builds the runtime. The plugin is used through its public API only
(``OtelHooks(...)``, as an app installs it), except for ``--knockout`` (a benchmark-only build,
``knockouts.py``).

``capture`` records one plugin run (the exact floor's plan, ``replay.py``) and checks it: the
plugin with ``metrics=False`` makes the very same spans, and the floor's replay, with and without
its measurements, makes the very same telemetry as the plugin (every difference printed, exit 1).
``runs`` sets one variant up, checks one run, warms it up, then makes ``--runs`` runs, nothing
timed: run twice under callgrind (two run counts), the difference is its instructions per run.

Variants (each in a process of its own; only the plugin's import ``flowra_otel``, checked: the
plugin patches flowra for the whole process):

* ``bare``          flowra alone.
* ``floor``         bare + ``replay.Floor``: plain handlers that make the plugin's spans and
                    measurements (the plan) with the raw SDK; ``floor_spans`` without measurements.
* ``ext_otel``      ``flowra.ext.otel`` (flowra 0.0.9+), its defaults, content as the workload's.
* ``plugin``        ``OtelHooks(tracer_provider=..., meter_provider=..., capture_content=...)``;
  ``spans_only``    the same with ``metrics=False``; ``content_off`` with ``capture_content=False``.
* ``untraced``      the plugin installed in the process (a traced runtime beside, which has run),
                    this runtime without it.

The SDK set-up of every traced variant is ``sdk.RecordingSdk``.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import cProfile
import gc
import importlib
import json
import pickle
import pstats
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import replay
import workloads
from opentelemetry import metrics, trace
from sdk import RecordingSdk

VARIANTS = ("bare", "floor", "floor_spans", "ext_otel", "plugin", "spans_only", "content_off", "untraced")
PLUGIN_VARIANTS = frozenset({"plugin", "spans_only", "content_off", "untraced"})


class LineModule(replay.Line, Protocol):
    """A line's module (``modern_line``, ``old_line``), as the worker uses it."""

    NAME: str

    async def build(self, workload: workloads.Workload) -> Any: ...

    def install_plugin(
        self, bench: Any, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider, **options: Any
    ) -> None: ...

    def install_ext_otel(self, bench: Any, tracer_provider: trace.TracerProvider, *, content: bool) -> None: ...


def line_of(workload: workloads.Workload) -> LineModule:
    """The workload's line module (imported by name: the other line's would not even import)."""
    module: LineModule = importlib.import_module(f"{workload.line}_line")
    return module


class Setup:
    """A variant made ready: ``run()`` is one run."""

    def __init__(self, run: Callable[[], Awaitable[object]], sdk: RecordingSdk | None, keep: object) -> None:
        self.run = run
        self.sdk = sdk
        self.keep = keep  # what must stay alive (the other runtime of ``untraced``)

    def flush(self) -> None:
        if self.sdk is not None:
            self.sdk.flush()


def plugin_options(workload: workloads.Workload, variant: str) -> dict[str, Any]:
    options: dict[str, Any] = {"capture_content": workload.content and variant != "content_off"}
    if variant == "spans_only":
        options["metrics"] = False
    return options


async def make_setup(
    variant: str, workload: workloads.Workload, plan: replay.Plan | None, knockouts: Sequence[str] = ()
) -> tuple[Setup, float | None]:
    """The variant, checked once; also the spans its exporter received from that run."""
    line = line_of(workload)
    if knockouts:
        import knockouts as ko

        ko.apply(knockouts)
    bench = await line.build(workload)
    sdk: RecordingSdk | None = None
    keep: object = None
    if variant in {"floor", "floor_spans"}:
        if plan is None:
            raise ValueError(f"{variant} needs --plan (made by the capture mode)")
        if plan.workload != workload.name:
            raise ValueError(f"the plan is of {plan.workload}, not {workload.name}")
        if knockouts:  # the floor of the plugin with them switched off: without the telemetry they drop
            import knockouts as ko

            plan = ko.floor_plan(plan, knockouts)
        sdk = RecordingSdk.create()
        meters = sdk.meter_provider if variant == "floor" else None
        line.subscribe_floor(bench, replay.Floor(plan, sdk.tracer_provider, meters))
    elif variant == "ext_otel":
        sdk = RecordingSdk.create()
        line.install_ext_otel(bench, sdk.tracer_provider, content=workload.content)
    elif variant in {"plugin", "spans_only", "content_off"}:
        sdk = RecordingSdk.create()
        line.install_plugin(bench, sdk.tracer_provider, sdk.meter_provider, **plugin_options(workload, variant))
    elif variant == "untraced":
        other_sdk = RecordingSdk.create()
        other = await line.build(workload)
        line.install_plugin(
            other, other_sdk.tracer_provider, other_sdk.meter_provider, **plugin_options(workload, variant)
        )
        await other.check()
        if not other_sdk.exported_spans():
            raise RuntimeError("the other runtime of untraced is not traced")
        keep = (other, other_sdk)
    elif variant != "bare":
        raise ValueError(f"unknown variant {variant!r}")
    before = sdk.exported_spans() if sdk is not None else 0
    await bench.check()
    spans = float(sdk.exported_spans() - before) if sdk is not None else None
    return Setup(bench.run, sdk, keep), spans


def _check_process(variant: str) -> None:
    if variant not in PLUGIN_VARIANTS and "flowra_otel" in sys.modules:
        raise RuntimeError(f"the {variant} process imported flowra_otel")


def load_plan(path: str | None) -> replay.Plan | None:
    if not path:
        return None
    plan: replay.Plan = pickle.loads(Path(path).read_bytes())
    return plan


# ------------------------------------------------------------------------------------------ modes


async def capture(workload: workloads.Workload, out: str) -> dict[str, Any]:
    """The plan of one plugin run, written to ``out``, and the self-checks (see the docstring)."""
    line = line_of(workload)

    def plugin(variant: str) -> Callable[[Any, trace.TracerProvider, metrics.MeterProvider], None]:
        def install(bench: Any, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider) -> None:
            line.install_plugin(bench, tracer_provider, meter_provider, **plugin_options(workload, variant))

        return install

    def build() -> Awaitable[Any]:
        return line.build(workload)

    plan = await replay.capture(line, build, plugin("plugin"), workload.name)
    spans_only = await replay.capture(line, build, plugin("spans_only"), workload.name)
    replay.compare(
        plan.describe(spans_only=True), spans_only.describe(spans_only=True), "the plugin with metrics=False"
    )
    if spans_only.records:
        raise RuntimeError("self-check failed: the plugin with metrics=False made measurements")
    await replay.check(line, build, plan)
    await replay.check(line, build, plan, metrics_on=False)
    Path(out).write_bytes(pickle.dumps(plan))  # noqa: ASYNC240 (before anything is measured)
    return {"workload": workload.name, **plan.summary(), "data_points": len(plan.data_points)}


async def plain_runs(
    variant: str, workload: workloads.Workload, runs: int, warmup: int, plan: replay.Plan | None, knockouts: list[str]
) -> dict[str, Any]:
    """Set ``variant`` up, warm it up, then make ``runs`` runs and flush: nothing timed."""
    setup, spans = await make_setup(variant, workload, plan, knockouts)
    for _ in range(warmup):
        await setup.run()
    setup.flush()
    gc.collect()
    for _ in range(runs):
        await setup.run()
    setup.flush()
    if not knockouts:
        _check_process(variant)
    plugin = sys.modules.get("flowra_otel")
    where = getattr(plugin, "__file__", None) if plugin is not None else None
    return {"variant": variant, "runs": runs, "spans_per_run": spans, "flowra_otel": where}


async def profile_runs(
    variant: str, workload: workloads.Workload, runs: int, warmup: int, top: int, plan: replay.Plan | None
) -> dict[str, Any]:
    """cProfile over ``runs`` runs, per run: self time by package, and the heaviest functions of
    ``flowra_otel`` by self time (tottime) and cumulative time (cumtime)."""
    setup, _ = await make_setup(variant, workload, plan)
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
    }


def _package_of(filename: str) -> str:
    path = filename.replace("\\", "/")
    for marker, name in (
        ("/flowra_otel/", "flowra_otel"),
        ("/opentelemetry/sdk/", "opentelemetry.sdk"),
        ("/opentelemetry/", "opentelemetry.api"),
        ("/flowra/", "flowra"),
        ("/asyncio/", "asyncio"),
        ("/copy.py", "copy (flowra's deep copies)"),
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


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    var = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


async def memory_runs(
    variant: str, workload: workloads.Workload, runs: int, warmup: int, checkpoints: int = 20
) -> dict[str, Any]:
    """Traced-memory growth per run over ``runs`` runs that follow ``warmup`` runs.

    tracemalloc runs from before the set-up (started later, every entry a full bounded cache
    replaced would look like growth). At each checkpoint the span queue is flushed and a full
    collection runs before the traced size and the live objects are read; the growth per run is
    the least-squares slope through those points."""
    tracemalloc.start(1)
    setup, _ = await make_setup(variant, workload, None)
    for _ in range(warmup):
        await setup.run()

    def traced_now() -> tuple[int, int]:
        setup.flush()
        gc.collect()
        return tracemalloc.get_traced_memory()[0], len(gc.get_objects())

    step = max(1, runs // checkpoints)
    marks = [*range(0, runs, step), runs]
    xs = array.array("d", marks)  # preallocated: the measurement allocates nothing between checkpoints
    ys = array.array("d", [0.0]) * len(marks)
    objects = array.array("d", [0.0]) * len(marks)
    snapshot = tracemalloc.take_snapshot()
    ys[0], objects[0] = traced_now()
    start = time.perf_counter()
    for index in range(1, len(marks)):
        for _ in range(marks[index] - marks[index - 1]):
            await setup.run()
        ys[index], objects[index] = traced_now()
    elapsed = time.perf_counter() - start
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    top = [
        {"where": _short(str(stat.traceback[0])), "bytes": stat.size_diff}
        for stat in after.compare_to(snapshot, "lineno")
        if stat.size_diff > 0 and not stat.traceback[0].filename.endswith("tracemalloc.py")
    ][:5]
    return {
        "variant": variant,
        "runs": runs,
        "warmup": warmup,
        "marks": list(xs),
        "traced_bytes": list(ys),
        "live_objects": list(objects),
        "slope_bytes_per_run": _slope(xs, ys),
        "seconds": elapsed,
        "top_growth": top,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("capture", "runs", "profile", "memory"))
    parser.add_argument("--workload", required=True, help="a name workloads.named knows")
    parser.add_argument("--variant", choices=VARIANTS, default="plugin")
    parser.add_argument("--knockout", action="append", default=[], help="a mechanism switched off (knockouts.py)")
    parser.add_argument("--plan", help="the floor's plan, made by capture")
    parser.add_argument("--out", help="where capture writes the plan")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    workload = workloads.named(args.workload)
    result: dict[str, Any]
    if args.mode == "capture":
        if not args.out:
            parser.error("capture needs --out")
        result = asyncio.run(capture(workload, args.out))
    elif args.mode == "runs":
        plan = load_plan(args.plan)
        result = asyncio.run(plain_runs(args.variant, workload, args.runs, args.warmup, plan, args.knockout))
    elif args.mode == "profile":
        plan = load_plan(args.plan)
        result = asyncio.run(profile_runs(args.variant, workload, args.runs, args.warmup, args.top, plan))
    else:
        result = asyncio.run(memory_runs(args.variant, workload, args.runs, args.warmup))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
