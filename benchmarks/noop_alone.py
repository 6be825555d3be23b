"""Tracing off, alone in its process: bare flowra vs OtelHooks with no-op tracer and meter providers.

run.py measures every variant in one process, where a recording OtelHooks (variant b) is also
registered, so its "tracing off" figure (c) includes the patches' cost. An app that turns
tracing off has no recording OtelHooks at all; this measures that case, interleaved in blocks
of 5 runs, CPU time:  .venv/bin/python benchmarks/noop_alone.py
"""

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import workload
from flowra.agent import HookRegistry
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.trace import NoOpTracerProvider

from flowra_otel import OtelHooks


async def main() -> None:
    h = HookRegistry()
    h.add(OtelHooks(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider()))
    noop = await workload.build_runtime(h)
    bare = await workload.build_runtime(HookRegistry())
    for _ in range(30):
        await workload.run_once(noop)
        await workload.run_once(bare)
    tb = tn = 0.0
    for _ in range(40):
        for rt, which in ((bare, 0), (noop, 1)):
            t = time.process_time()
            for _ in range(5):
                await workload.run_once(rt)
            d = time.process_time() - t
            if which:
                tn += d
            else:
                tb += d
    bare_ms, noop_ms = tb / 200 * 1000, tn / 200 * 1000
    print(f"bare {bare_ms:.3f} ms/run, OtelHooks(no-op providers) {noop_ms:.3f} ms/run: {(tn / tb - 1) * 100:+.1f}%")


asyncio.run(main())
