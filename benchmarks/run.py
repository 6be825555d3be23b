"""flowra-otel overhead benchmark: ``./dev bench`` (or ``.venv/bin/python benchmarks/run.py``).

Measures, side by side in one run, what OtelHooks costs on a zero-latency scripted tool loop
(20 LLM + tool iterations per run, 42 spans when traced), what the raw OpenTelemetry SDK costs for
the same spans, how flowra 0.0.93's own tracer compares, and whether memory stays flat. The last
line of output is a one-line ``RESULT ...`` summary. See docs/performance.md for the method.

    ./dev bench              full run, about 3-4 minutes on a 2-core machine
    ./dev bench --quick      about 20-30 seconds, noisier
    ./dev bench --profile    add a cProfile breakdown of the traced variants
    ./dev bench --save       also write the raw measurements to benchmarks/results/
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = HERE / "worker.py"
WORKER_093 = HERE / "flowra093_worker.py"
VENV_093 = HERE / ".venv-flowra-0.0.93"
FLOWRA_093 = "0.0.93"

SPANS_PER_RUN = 42  # 1 invoke_agent + 21 chat + 20 execute_tool (checked by the workers)
PLUGIN_VARIANTS = ("unpatched", "patched", "nosdk", "nometrics", "recording", "raw", "rawmetrics")
OFF_VARIANTS = ("offbare", "noop")

TARGET_RECORDING = 8.0  # % over bare flowra, recording SDK
TARGET_NOOP = 1.0  # % over bare flowra, tracing off
TARGET_PER_SPAN = 1.5  # plugin cost per span / raw SDK cost per span
TARGET_MEM = 100.0  # bytes per run that b adds over bare flowra; one leaked span alone is over 1 KiB

LABELS = {
    "bare": "a0  bare flowra, before the patch (own processes; flowra_otel never imported)",
    "unpatched": "a   bare flowra, patches taken off (patches.uninstall(); side by side with a'-f)",
    "patched": "a'  bare flowra, patches installed, no OtelHooks on its registry",
    "recording": "b   OtelHooks + recording SDK (BatchSpanProcessor->drop, MeterProvider+InMemoryMetricReader)",
    "nometrics": "e   OtelHooks + b's recording TracerProvider + NoOpMeterProvider() (b without metrics)",
    "nosdk": "g   OtelHooks enabled, tracer and meter providers that hand out no-op ones (no SDK work)",
    "raw": "d   raw SDK: the same 42 spans via start_span/set_attributes/end, no flowra",
    "rawmetrics": "f   raw SDK: the same histogram records via Histogram.record on b's meter set-up, no flowra",
    "offbare": "c0  bare flowra, side by side with c (flowra_otel imported, the no-op OtelHooks exists)",
    "noop": "c   OtelHooks(NoOpTracerProvider(), NoOpMeterProvider()), no other OtelHooks in the process",
}


@dataclass(frozen=True)
class Plan:
    rounds: int
    runs: int  # timed runs per variant per round
    warmup: int
    block: int
    runs_093: int
    procs_093: int
    mem_runs: int
    mem_control_runs: int
    mem_warmup: int
    label: str


FULL = Plan(
    rounds=5,
    runs=100,
    warmup=10,
    block=5,
    runs_093=100,
    procs_093=2,
    mem_runs=300,
    mem_control_runs=200,
    mem_warmup=100,
    label="full",
)
QUICK = Plan(
    rounds=1,
    runs=20,
    warmup=3,
    block=5,
    runs_093=20,
    procs_093=1,
    mem_runs=40,
    mem_control_runs=40,
    mem_warmup=20,
    label="quick",
)


@dataclass
class Samples:
    """Per-run CPU and wall times of one variant, pooled over rounds, plus each round's median."""

    cpu: list[int] = field(default_factory=list)
    wall: list[int] = field(default_factory=list)
    round_cpu_medians: list[float] = field(default_factory=list)
    gc_ns_per_run: list[float] = field(default_factory=list)
    spans_per_run: float | None = None

    def add(self, cpu: Sequence[int], wall: Sequence[int]) -> None:
        self.cpu.extend(cpu)
        self.wall.extend(wall)
        self.round_cpu_medians.append(statistics.median(cpu))

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpu) / 1e6

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.wall) / 1e6

    @property
    def gc_ms(self) -> float | None:
        return statistics.mean(self.gc_ns_per_run) / 1e6 if self.gc_ns_per_run else None


def log(message: str) -> None:
    """Progress goes to stderr; the report (and its RESULT line last) goes to stdout."""
    print(message, file=sys.stderr, flush=True)


def out(message: str = "") -> None:
    print(message, flush=True)


class WorkerError(RuntimeError):
    pass


def run_worker(python: str | Path, script: Path, args: Sequence[str], timeout: float = 1800) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PYTHONHASHSEED"] = "0"  # same dict/set layouts in every worker process
    proc = subprocess.run(
        [str(python), str(script), *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-12:])
        raise WorkerError(f"{script.name} {' '.join(args)} exited {proc.returncode}:\n{tail}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise WorkerError(f"{script.name} printed no JSON: {proc.stdout[-500:]!r} {proc.stderr[-500:]!r}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


# ------------------------------------------------------------------------------------- timing


METRIC_RECORDS: dict[str, int] = {}


def measure_plugin(plan: Plan) -> tuple[dict[str, Samples], bool, bool]:
    """Rounds of three processes (plugin, bare, tracing off), rotating which goes first.

    Tracing off gets a process of its own: an ``OtelHooks`` with no-op providers may leave flowra
    unpatched, which it could not show in a process where other ``OtelHooks`` record.
    Returns the samples, whether ``a`` was measured (patches taken off), and whether creating the
    no-op ``OtelHooks`` patched flowra.
    """
    samples: dict[str, Samples] = {}
    variants = list(PLUGIN_VARIANTS)
    toggle = True
    off_patched = False
    common = ["--runs", str(plan.runs), "--warmup", str(plan.warmup), "--block", str(plan.block)]
    for index in range(plan.rounds):
        jobs = [list(PLUGIN_VARIANTS), ["bare"], list(OFF_VARIANTS)]
        jobs = jobs[index % 3 :] + jobs[: index % 3]
        for planned in jobs:
            job = variants if planned[0] == "unpatched" else planned
            started = time.perf_counter()
            try:
                result = run_worker(sys.executable, WORKER, ["time", "--variants", ",".join(job), *common])
            except WorkerError as exc:
                if "unpatched" not in job or "uninstall" not in str(exc):
                    raise
                log("  flowra_otel.patches.uninstall() is unavailable: a is measured only in its own processes (a0)")
                variants.remove("unpatched")
                toggle = False
                job = list(variants)
                result = run_worker(sys.executable, WORKER, ["time", "--variants", ",".join(job), *common])
            if "noop" in job and result.get("flowra_patched_at_end"):
                off_patched = True
            METRIC_RECORDS.update(result.get("metric_records_per_run", {}))
            for name, cpu in result["cpu_ns"].items():
                entry = samples.setdefault(name, Samples())
                entry.add(cpu, result["wall_ns"][name])
                entry.gc_ns_per_run.append(result["gc_ns_per_run"][name])
                if result["spans_per_run"].get(name) is not None:
                    entry.spans_per_run = result["spans_per_run"][name]
            what = "plugin" if "recording" in job else "bare" if job == ["bare"] else "tracing off"
            log(
                f"  round {index + 1}/{plan.rounds}: {what:<12} {time.perf_counter() - started:5.1f}s  "
                + "  ".join(f"{n}={statistics.median(c) / 1e6:.2f}ms" for n, c in result["cpu_ns"].items())
            )
    return samples, toggle, off_patched


def paired_round_ratios(samples: dict[str, Samples], num: str, den: str) -> list[float]:
    return [n / d for n, d in zip(samples[num].round_cpu_medians, samples[den].round_cpu_medians, strict=True)]


# ------------------------------------------------------------------------------------- flowra 0.0.93


def find_python() -> str | None:
    """A Python >= 3.12 with venv, searched like ``./dev``'s find_python."""
    candidates: list[str] = []
    if os.environ.get("FLOWRA_OTEL_PYTHON"):
        candidates.append(os.environ["FLOWRA_OTEL_PYTHON"])
    candidates += ["python3.13", "python3.12", "python3", "python"]
    roots: list[str] = []
    if shutil.which("pyenv"):
        with contextlib.suppress(OSError):
            roots.append(subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip())
    roots += [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv"]
    roots += ["/usr/local/pyenv", "/opt/pyenv"]
    for root in roots:
        versions = Path(root) / "versions" if root else None
        if versions is None or not versions.is_dir():
            continue
        found = [p for p in versions.glob("3.1[2-9]*") if (p / "bin" / "python").exists()]
        found.sort(key=lambda p: [int(x) if x.isdigit() else 0 for x in p.name.replace("-", ".").split(".")])
        candidates += [str(p / "bin" / "python") for p in reversed(found)]
    candidates += [
        "/usr/local/bin/python3.13",
        "/usr/local/bin/python3.12",
        "/usr/bin/python3.13",
        "/usr/bin/python3.12",
    ]
    check = "import sys, venv; sys.exit(sys.version_info < (3, 12))"
    for candidate in candidates:
        path = shutil.which(candidate)
        if path and subprocess.run([path, "-c", check], capture_output=True, check=False).returncode == 0:
            return path
    return None


def ensure_venv_093(sdk_version: str) -> Path:
    """``benchmarks/.venv-flowra-0.0.93`` with flowra 0.0.93 and the main environment's SDK version."""
    python = VENV_093 / "bin" / "python"
    want = f"flowra=={FLOWRA_093} opentelemetry-sdk=={sdk_version}"
    stamp = VENV_093 / ".stamp"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return python
    base = find_python()
    if base is None:
        raise WorkerError("no Python >= 3.12 found (PATH, pyenv versions, /usr/local/bin, /usr/bin)")
    log(f"  building {VENV_093.relative_to(ROOT)} with {base} ({want})")
    shutil.rmtree(VENV_093, ignore_errors=True)
    subprocess.run([base, "-m", "venv", str(VENV_093)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    proc = subprocess.run([*pip, *want.split()], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        noise = "is ignored: it is neither"
        why = "\n".join(line for line in proc.stderr.splitlines() if line.strip() and noise not in line)
        raise WorkerError(f"pip install {want} failed:\n{why[-1500:]}")
    stamp.write_text(want + "\n")
    return python


@dataclass
class Result093:
    samples: dict[str, Samples]
    spans_per_run: dict[str, float | None]
    info: dict[str, Any]


def measure_093(plan: Plan, sdk_version: str) -> Result093:
    python = ensure_venv_093(sdk_version)
    samples: dict[str, Samples] = {}
    spans: dict[str, float | None] = {}
    info: dict[str, Any] = {}
    for index in range(plan.procs_093):
        started = time.perf_counter()
        args = ["--runs", str(plan.runs_093), "--warmup", str(plan.warmup), "--block", str(plan.block)]
        result = run_worker(python, WORKER_093, args)
        for name, cpu in result["cpu_ns"].items():
            samples.setdefault(name, Samples()).add(cpu, result["wall_ns"][name])
        spans = result["spans_per_run"]
        info = {k: v for k, v in result.items() if k not in {"cpu_ns", "wall_ns", "spans_per_run"}}
        log(
            f"  process {index + 1}/{plan.procs_093}: {time.perf_counter() - started:5.1f}s  "
            + "  ".join(f"{n}={statistics.median(c) / 1e6:.2f}ms" for n, c in result["cpu_ns"].items())
        )
    return Result093(samples, spans, info)


# ------------------------------------------------------------------------------------- report


def report_timing(samples: dict[str, Samples], toggle: bool, off_patched: bool) -> dict[str, float]:
    base = "unpatched" if toggle else "bare"
    a = samples[base]
    out("Per-run time: median over all timed runs of each variant; CPU time of the worker process (all")
    out("its threads; immune to being pre-empted by other processes), wall-clock time, and the mean time")
    out("spent in the cyclic garbage collector per run (part of both)")
    out(f"  {'variant':<96} {'cpu ms':>7} {'wall ms':>8} {'gc ms':>6} {'spans':>6}  per-round cpu medians")
    order = ("bare", "unpatched", "patched", "recording", "nometrics", "nosdk", "raw", "rawmetrics", "offbare", "noop")
    for name in order:
        if name not in samples:
            continue
        s = samples[name]
        spans = f"{s.spans_per_run:.0f}" if s.spans_per_run is not None else "-"
        rounds = " ".join(f"{m / 1e6:.2f}" for m in s.round_cpu_medians)
        gc_ms = f"{s.gc_ms:.2f}" if s.gc_ms is not None else "-"
        out(f"  {LABELS[name]:<96} {s.cpu_ms:7.3f} {s.wall_ms:8.3f} {gc_ms:>6} {spans:>6}  {rounds}")
    out()
    b, d, f, p = samples["recording"], samples["raw"], samples["rawmetrics"], samples["patched"]
    e, g = samples["nometrics"], samples["nosdk"]
    c, c0, a0 = samples["noop"], samples["offbare"], samples["bare"]
    # Tracing off against bare flowra side by side in its own process, unless the no-op OtelHooks
    # patched flowra there too (then c0 is not bare: use a0, from processes of its own).
    off_base, off_base_name = (a0, "a0") if off_patched else (c0, "c0")
    r_rec, r_patch = b.cpu_ms / a.cpu_ms, p.cpu_ms / a.cpu_ms
    r_noop = c.cpu_ms / off_base.cpu_ms
    per_span_plugin = (b.cpu_ms - a.cpu_ms) / SPANS_PER_RUN * 1e3
    per_span_raw = d.cpu_ms / SPANS_PER_RUN * 1e3
    per_span_ratio = per_span_plugin / per_span_raw

    def spread(num: str, den: str = base) -> str:
        ratios = paired_round_ratios(samples, num, den)
        return f"[per round {pct(min(ratios))} .. {pct(max(ratios))}]"

    which = "a (patches taken off, side by side)" if toggle else "a0 (own processes)"
    out(f"Overheads against {which}:")
    out(
        f"  recording       (b-a)/a  = {pct(r_rec):>7}  {spread('recording'):<34} target <= +{TARGET_RECORDING:.0f}%: "
        f"{verdict((r_rec - 1) * 100 <= TARGET_RECORDING)}"
    )
    out(
        f"  tracing off     (c-{off_base_name})/{off_base_name} = {pct(r_noop):>7}  "
        f"{spread('noop', 'offbare' if not off_patched else 'bare'):<34} target <= +{TARGET_NOOP:.0f}%: "
        f"{verdict((r_noop - 1) * 100 <= TARGET_NOOP)}"
    )
    if off_patched:
        out("    (creating OtelHooks(NoOpTracerProvider(), NoOpMeterProvider()) patched flowra: c is against a0)")
    out(
        f"  patches only    (a'-a)/a = {pct(r_patch):>7}  {spread('patched'):<34} (an untraced run, while another "
        "OtelHooks records in the process)"
    )
    met = verdict(per_span_ratio <= TARGET_PER_SPAN)
    out(
        f"  per emitted span: plugin (b-a)/42 = {per_span_plugin:.1f} us, raw SDK d/42 = {per_span_raw:.1f} us "
        f"-> {per_span_ratio:.2f}x   target <= {TARGET_PER_SPAN}x: {met}"
    )
    floor = (d.cpu_ms + f.cpu_ms) / SPANS_PER_RUN * 1e3
    out(
        f"  the same against the raw SDK doing b's spans and metrics, (d+f)/42 = {floor:.1f} us: "
        f"{per_span_plugin / floor:.2f}x"
    )
    out(
        "    (d and f run the SDK in a tight loop, caches hot: inside a flowra run cProfile sees the same SDK calls"
        " take ~1.8x longer)"
    )
    out()
    total = b.cpu_ms - a.cpu_ms
    records = METRIC_RECORDS.get("rawmetrics", "?")
    parts = (
        ("patches and per-run book, with no OtelHooks (a'-a)", p.cpu_ms - a.cpu_ms),
        ("the plugin's own work per event, no SDK work (g-a')", g.cpu_ms - p.cpu_ms),
        ("spans: SDK work + the plugin's span calls (e-g)", e.cpu_ms - g.cpu_ms),
        ("   of which the raw SDK cost of those 42 spans (d)", d.cpu_ms),
        (f"metrics: {records} histogram records per run (b-e)", b.cpu_ms - e.cpu_ms),
        ("   of which the raw SDK cost of those records (f)", f.cpu_ms),
        ("everything but the raw SDK work ((b-a)-d-f)", total - d.cpu_ms - f.cpu_ms),
    )
    out(f"Where b's {total:.2f} ms per run over a goes (differences of medians, so approximate):")
    for text, ms in parts:
        out(f"  {text:<56} {ms:6.2f} ms  {ms / total * 100:5.1f}%")
    if toggle:
        cross = paired_round_ratios(samples, "bare", "unpatched")
        out(
            f"  cross-check a0/a = {a0.cpu_ms / a.cpu_ms:.3f} (same code in separate processes; "
            f"per round {min(cross):.3f} .. {max(cross):.3f}: the process-to-process noise)"
        )
        out(f"  against a0 instead: recording {pct(b.cpu_ms / a0.cpu_ms)}, tracing off {pct(c.cpu_ms / a0.cpu_ms)}")
    out()
    return {
        "overhead_nometrics": (e.cpu_ms / a.cpu_ms - 1) * 100,
        "extra_ms_recording": total,
        "extra_ms_nometrics": e.cpu_ms - a.cpu_ms,
        "overhead_recording": (r_rec - 1) * 100,
        "overhead_noop": (r_noop - 1) * 100,
        "overhead_patches": (r_patch - 1) * 100,
        "per_span_plugin_us": per_span_plugin,
        "per_span_raw_us": per_span_raw,
        "per_span_vs_raw": per_span_ratio,
        "per_span_vs_raw_with_metrics": per_span_plugin / floor,
        "bare_ms": a.cpu_ms,
    }


def report_093(result: Result093, ratios: dict[str, float]) -> float:
    s = result.samples
    bare = s["bare"].cpu_ms
    out(f"flowra {result.info.get('flowra_version', FLOWRA_093)} with its own tracer ({result.info.get('install')}):")
    out("  same workload on TurnAgent (0.0.9+ renamed ToolLoopAgent), same recording SDK set-up set as the global")
    out("  tracer provider (its tracer has no provider argument; it records no metrics); variants interleaved")
    rows = (
        ("bare", "bare flowra 0.0.93"),
        ("tracer", "OTEL_TRACING.install(runtime)  (defaults: agent + step + LLM + tool spans)"),
        ("tracer_nosteps", "OTEL_TRACING.install(runtime, trace_steps=False)"),
    )
    out(f"  {'variant':<80} {'cpu ms':>7} {'wall ms':>8} {'spans':>6} {'overhead':>9} {'us/span':>8}")
    for name, label in rows:
        if name not in s:
            continue
        spans = result.spans_per_run.get(name)
        ratio = s[name].cpu_ms / bare
        per_span = (s[name].cpu_ms - bare) / spans * 1e3 if spans else None
        out(
            f"  {label:<80} {s[name].cpu_ms:7.3f} {s[name].wall_ms:8.3f} {spans if spans else '-':>6} "
            f"{pct(ratio) if name != 'bare' else '':>9} {f'{per_span:.1f}' if per_span else '':>8}"
        )
    ours, ours_per_span = ratios["overhead_recording"], ratios["per_span_plugin_us"]
    theirs = (s["tracer"].cpu_ms / bare - 1) * 100
    nosteps = (s["tracer_nosteps"].cpu_ms / bare - 1) * 100
    out(
        f"  flowra-otel (b) {ours:+.1f}% at {ours_per_span:.1f} us/span vs flowra 0.0.93's tracer {theirs:+.1f}% "
        f"({nosteps:+.1f}% without step spans); target (lower overhead ratio): {verdict(ours < theirs)}"
    )
    out(
        f"  (flowra 0.0.93's tracer records no metrics; flowra-otel without its metrics, variant e: "
        f"{ratios['overhead_nometrics']:+.1f}%)"
    )
    out(
        f"  in ms added per run: flowra-otel {ratios['extra_ms_recording']:.2f} (b: 42 spans + metrics), "
        f"{ratios['extra_ms_nometrics']:.2f} (e: 42 spans); flowra 0.0.93's tracer "
        f"{s['tracer'].cpu_ms - bare:.2f} (105 spans), {s['tracer_nosteps'].cpu_ms - bare:.2f} (62 spans); "
        f"bare flowra 0.0.93 is {bare / ratios['bare_ms']:.1f}x slower than 0.0.8, which divides its ratio"
    )
    out()
    return theirs


def measure_memory(plan: Plan) -> tuple[dict[str, Any], dict[str, Any] | None]:
    args = ["memory", "--variant", "recording", "--runs", str(plan.mem_runs), "--warmup", str(plan.mem_warmup)]
    started = time.perf_counter()
    recording = run_worker(sys.executable, WORKER, args)
    log(f"  recording: {plan.mem_runs} runs, {time.perf_counter() - started:.1f}s")
    control = None
    if plan.mem_control_runs:
        args = ["memory", "--variant", "bare", "--runs", str(plan.mem_control_runs), "--warmup", str(plan.mem_warmup)]
        started = time.perf_counter()
        control = run_worker(sys.executable, WORKER, args)
        log(f"  bare control: {plan.mem_control_runs} runs, {time.perf_counter() - started:.1f}s")
    return recording, control


def report_memory(recording: dict[str, Any], control: dict[str, Any] | None, asked: int) -> float:
    """Returns what b grows per run beyond bare flowra (b's own growth when there is no control)."""
    slope = float(recording["slope_bytes_per_run"])
    out(
        "Memory under tracemalloc (on from process start), growth per run = least-squares slope through "
        "~21 checkpoints, each after a span flush and a full gc:"
    )
    out(
        f"  b  recording: {slope:+7.1f} B/run over {recording['runs']} runs after {recording['warmup']} warm-up runs "
        f"(end - start {recording['growth_bytes'] / 1024:+.1f} KiB, peak traced "
        f"{recording['peak_traced_bytes'] / 2**20:.1f} MiB, {recording['seconds']:.0f}s: tracemalloc makes a run "
        f"~4x slower)"
    )
    plugin = slope
    if control is not None:
        base = float(control["slope_bytes_per_run"])
        plugin = slope - base
        out(
            f"  a0 bare flowra (control): {base:+7.1f} B/run over {control['runs']} runs: flowra's own caches "
            "still filling"
        )
        out(f"  b - a0 = {plugin:+.1f} B/run: what the plugin keeps per run (mem_per_run below)")
    if recording["top_growth"]:
        where = "; ".join(f"{_short(t['where'])} {t['bytes']:+d} B" for t in recording["top_growth"][:3])
        out(f"  largest growth sites in b: {where}")
    if asked != recording["runs"]:
        out(f"  note: {recording['runs']} runs, not {asked}: see --mem-runs")
    out(
        f"  target flat (<= {TARGET_MEM:.0f} B/run over bare flowra; one leaked span alone is > 1 KiB): "
        f"{verdict(plugin <= TARGET_MEM)}"
    )
    out()
    return plugin


def _short(where: str) -> str:
    for marker in ("/site-packages/", "/work/main/", "/lib/python3.13/", "/lib/python3.12/"):
        if marker in where:
            return where.split(marker, 1)[1]
    return where


def report_profiles(plan: Plan) -> None:
    out("cProfile (self time per run by package; cProfile inflates everything, compare the columns):")
    runs = max(20, plan.runs)
    results = {}
    for variant in ("unpatched", "nosdk", "nometrics", "recording"):
        results[variant] = run_worker(sys.executable, WORKER, ["profile", "--variant", variant, "--runs", str(runs)])
    packages = sorted({p for r in results.values() for p in r["by_package_ms_per_run"]})
    out(f"  {'package':<20}" + "".join(f"{v:>12}" for v in results))
    for package in sorted(packages, key=lambda p: -results["recording"]["by_package_ms_per_run"].get(p, 0.0)):
        cells = "".join(f"{r['by_package_ms_per_run'].get(package, 0.0):12.2f}" for r in results.values())
        out(f"  {package:<20}{cells}")
    out(f"  {'total':<20}" + "".join(f"{r['profiled_ms_per_run']:12.2f}" for r in results.values()))
    out("  heaviest flowra_otel / opentelemetry / wrapt functions in b (recording) by self time, ms per run:")
    for row in results["recording"]["plugin_self"][:15]:
        out(f"    self {row['self_ms']:6.3f}  cum {row['cum_ms']:7.3f}  calls {row['calls']:6.1f}  {row['where']}")
    out("  flowra_otel functions in b by cumulative time (async wrappers' figures are unreliable), ms per run:")
    for row in results["recording"]["flowra_otel_by_cum"][:15]:
        out(f"    self {row['self_ms']:6.3f}  cum {row['cum_ms']:7.3f}  calls {row['calls']:6.1f}  {row['where']}")
    out()


# ------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a ~20-30 s run: fewer rounds and runs")
    parser.add_argument("--rounds", type=int, help="timing rounds (one plugin + one bare process each)")
    parser.add_argument("--runs", type=int, help="timed runs per variant per round")
    parser.add_argument("--mem-runs", type=int, help="traced runs of b in the memory check (10000: ~20 min)")
    parser.add_argument("--skip-093", action="store_true", help="skip the flowra 0.0.93 comparison")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile breakdown")
    parser.add_argument("--save", action="store_true", help="write raw results to benchmarks/results/")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    overrides: dict[str, Any] = {}
    if args.rounds:
        overrides["rounds"] = args.rounds
    if args.runs:
        overrides["runs"] = overrides["runs_093"] = args.runs
    if args.mem_runs:
        overrides["mem_runs"] = args.mem_runs
    if overrides:
        plan = Plan(**{**plan.__dict__, **overrides})
    sdk_version = importlib.metadata.version("opentelemetry-sdk")
    started = time.perf_counter()

    out("flowra-otel benchmark: zero-latency scripted tool loop on AgentRuntime + ToolLoopAgent, 20 LLM calls")
    out("that each ask for one call of a trivial tool, then a 21st that answers (42 spans per run when traced)")
    out(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
        f"flowra {importlib.metadata.version('flowra')}, opentelemetry-sdk {sdk_version}, "
        f"flowra-otel {importlib.metadata.version('flowra-otel')}"
    )
    out(
        f"plan ({plan.label}): {plan.rounds} rounds x {plan.runs} timed runs per variant, variants interleaved in "
        f"blocks of {plan.block} runs; {plan.warmup} warm-up runs per variant per process"
    )
    out()

    log(
        f"[1/3] timing: {plan.rounds} rounds, each a plugin process (a, a', b, e, g, d, f), a bare one (a0) "
        "and a tracing-off one (c0, c)"
    )
    samples, toggle, off_patched = measure_plugin(plan)
    ratios = report_timing(samples, toggle, off_patched)

    theirs: float | None = None
    result093: Result093 | None = None
    if args.skip_093:
        out("flowra 0.0.93 comparison: skipped (--skip-093)")
        out()
    else:
        log(f"[2/3] flowra {FLOWRA_093}: {plan.procs_093} process(es) x {plan.runs_093} runs per variant")
        try:
            result093 = measure_093(plan, sdk_version)
            theirs = report_093(result093, ratios)
        except (WorkerError, OSError, subprocess.SubprocessError) as exc:
            out(f"flowra {FLOWRA_093} comparison: not possible here: {exc}")
            out()

    log(f"[3/3] memory: {plan.mem_runs} traced runs of b, then {plan.mem_control_runs} of bare flowra as control")
    recording, control = measure_memory(plan)
    mem = report_memory(recording, control, args.mem_runs or plan.mem_runs)

    if args.profile:
        log("[+] profiling")
        report_profiles(plan)

    met = {
        "recording": ratios["overhead_recording"] <= TARGET_RECORDING,
        "noop": ratios["overhead_noop"] <= TARGET_NOOP,
        "per_span": ratios["per_span_vs_raw"] <= TARGET_PER_SPAN,
        "flowra093": theirs is not None and ratios["overhead_recording"] < theirs,
        "memory": mem <= TARGET_MEM,
    }
    out(
        "Targets: "
        + ", ".join(f"{k} {verdict(v)}" for k, v in met.items())
        + f"  ({time.perf_counter() - started:.0f}s)"
    )
    if args.save:
        save(plan, samples, result093, recording, control, ratios)
    theirs_text = f"{theirs:+.1f}%" if theirs is not None else "n/a"
    out(
        f"RESULT overhead_recording={ratios['overhead_recording']:+.1f}% "
        f"overhead_noop={ratios['overhead_noop']:+.1f}% "
        f"per_span_vs_raw={ratios['per_span_vs_raw']:.2f}x "
        f"flowra093_overhead={theirs_text} "
        f"mem_per_run={mem:+.0f} B"
    )
    return 0


def save(
    plan: Plan,
    samples: dict[str, Samples],
    result093: Result093 | None,
    recording: dict[str, Any],
    control: dict[str, Any] | None,
    ratios: dict[str, float],
) -> None:
    folder = HERE / "results"
    folder.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    data = {
        "plan": plan.__dict__,
        "ratios": ratios,
        "samples": {k: v.__dict__ for k, v in samples.items()},
        "flowra093": None if result093 is None else {k: v.__dict__ for k, v in result093.samples.items()},
        "memory": {"recording": recording, "bare": control},
    }
    path = folder / f"bench-{stamp}.json"
    path.write_text(json.dumps(data))
    log(f"raw results: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
